"""tools/new_plugin.py on a small stand-in repository: what it writes and where it
inserts, the refusals, and that nothing is written on a refusal or a dry run.
Whether the generated code compiles and passes the suites is checked by
tools/scaffold_check.sh (part of tools/test.sh), which generates into the real
tree; this test keeps the editing logic from drifting."""

import os
import subprocess
import sys
import tempfile
import unittest

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'new_plugin.py')

UMBRELLA = '''cc_library(
    name = "all",
    deps = [
        "//aggregators/efl",
        "//aggregators/fedavg",
        "//aggregators/scaffold",
    ],
)
'''

GOLDEN = '''TEST(RegistryGoldenTest, Datasets) {
  EXPECT_THAT(fl::Registry<fl::Dataset>::Global().Names(), ElementsAre("mnist"));
}
TEST(RegistryGoldenTest, Partitioners) {
  EXPECT_THAT(fl::Registry<fl::Partitioner>::Global().Names(), ElementsAre("iid"));
}
TEST(RegistryGoldenTest, Models) {
  EXPECT_THAT(fl::Registry<fl::Model>::Global().Names(), ElementsAre("mlp"));
}
TEST(RegistryGoldenTest, Aggregators) {
  EXPECT_THAT(fl::Registry<fl::Aggregator>::Global().Names(), ElementsAre(
                                                                  "efl",
                                                                  "fedavg",
                                                                  "scaffold"));
}
TEST(RegistryGoldenTest, ClientHooks) {
  EXPECT_THAT(fl::Registry<fl::ClientHook>::Global().Names(), ElementsAre(
                                                                  "fedprox",
                                                                  "scaffold"));
}
'''

COMPOSITION = '''const std::map<std::string, HookEffects>& KnownEffects() {
  static const auto* effects = [] {
    using State = HookEffects::State;
    auto* effects = new std::map<std::string, HookEffects>;
    // FedProx: a loss term.
    (*effects)["fedprox"].pulls_to_global = true;

    (*effects)["scaffold"].state = State::kKept;
    return effects;
  }();
  return *effects;
}
'''


class NewPluginTest(unittest.TestCase):

  def setUp(self):
    self.root = tempfile.mkdtemp()
    for folder in ('aggregators', 'data', 'models'):
      os.makedirs(os.path.join(self.root, folder))
      with open(os.path.join(self.root, folder, 'BUILD'), 'w') as f:
        f.write(UMBRELLA.replace('aggregators', folder))
    os.makedirs(os.path.join(self.root, 'tools'))
    self.write('tools/registry_golden_test.cc', GOLDEN)
    self.write('aggregators/composition_test.cc', COMPOSITION)

  def write(self, path, text):
    with open(os.path.join(self.root, path), 'w') as f:
      f.write(text)

  def read(self, path):
    with open(os.path.join(self.root, path)) as f:
      return f.read()

  def run_tool(self, *args):
    return subprocess.run([sys.executable, TOOL, '--root', self.root, *args],
                          capture_output=True, text=True)

  def snapshot(self):
    files = {}
    for folder, _, names in os.walk(self.root):
      for name in names:
        path = os.path.join(folder, name)
        files[path] = open(path).read()
    return files

  def test_aggregator_files_umbrella_and_golden_list_in_order(self):
    result = self.run_tool('--kind=aggregator', '--name=fednova', '--class_name=FedNova')
    self.assertEqual(result.returncode, 0, result.stderr)
    for name in ('BUILD', 'fednova_options.proto', 'fednova.cc', 'fednova_test.cc'):
      self.assertTrue(os.path.exists(os.path.join(self.root, 'aggregators/fednova', name)), name)
    self.assertIn('message FedNovaOptions', self.read('aggregators/fednova/fednova_options.proto'))
    self.assertIn('FL_REGISTER_PLUGIN(fl::Aggregator, "fednova", FedNovaOptions, CreateFedNova)',
                  self.read('aggregators/fednova/fednova.cc'))
    # The generated test fails until filled in.
    self.assertIn('quiet_NaN', self.read('aggregators/fednova/fednova_test.cc'))
    deps = [l.strip() for l in self.read('aggregators/BUILD').split('\n') if '"//' in l]
    self.assertEqual(deps, ['"//aggregators/efl",', '"//aggregators/fedavg",',
                            '"//aggregators/fednova",', '"//aggregators/scaffold",'])
    golden = self.read('tools/registry_golden_test.cc')
    aggregators = golden[golden.index('fl::Aggregator'):golden.index('ClientHooks')]
    self.assertLess(aggregators.index('"fedavg"'), aggregators.index('"fednova"'))
    self.assertLess(aggregators.index('"fednova"'), aggregators.index('"scaffold"'))

  def test_one_line_golden_list_gets_the_name_in_order(self):
    result = self.run_tool('--kind=model', '--name=aaa_net')
    self.assertEqual(result.returncode, 0, result.stderr)
    golden = self.read('tools/registry_golden_test.cc')
    models = golden[golden.index('fl::Model>'):golden.index('Aggregators')]
    self.assertLess(models.index('"aaa_net"'), models.index('"mlp"'))
    self.assertIn('"//models/aaa_net",', self.read('models/BUILD'))

  def test_hook_gets_declared_effects_in_order(self):
    result = self.run_tool('--kind=hook', '--name=gamma_hook')
    self.assertEqual(result.returncode, 0, result.stderr)
    composition = self.read('aggregators/composition_test.cc')
    self.assertLess(composition.index('["fedprox"]'), composition.index('["gamma_hook"]'))
    self.assertLess(composition.index('["gamma_hook"]'), composition.index('["scaffold"]'))

  def test_refusals_write_nothing(self):
    before = self.snapshot()
    for args, message in [
        (['--kind=aggregator', '--name=FedFoo'], '--name: must be lower_snake_case'),
        (['--kind=aggregator', '--name=fedavg'], '//aggregators/fedavg is already in :all'),
        (['--kind=hook', '--name=fedprox'], '"fedprox" is already in the fl::ClientHook list'),
        (['--kind=aggregator', '--name=fedfoo', '--class_name=fedFoo'],
         '--class_name: must be CamelCase'),
    ]:
      result = self.run_tool(*args)
      self.assertNotEqual(result.returncode, 0, args)
      self.assertIn(message, result.stderr + result.stdout, args)
    self.assertEqual(self.snapshot(), before)

  def test_existing_folder_is_refused(self):
    os.makedirs(os.path.join(self.root, 'aggregators/fedfoo'))
    result = self.run_tool('--kind=aggregator', '--name=fedfoo')
    self.assertNotEqual(result.returncode, 0)
    self.assertIn('aggregators/fedfoo already exists', result.stderr)

  def test_dry_run_writes_nothing(self):
    before = self.snapshot()
    result = self.run_tool('--kind=dataset', '--name=toy_data', '--dry_run')
    self.assertEqual(result.returncode, 0, result.stderr)
    self.assertIn('toy_data', result.stdout)
    self.assertEqual(self.snapshot(), before)


if __name__ == '__main__':
  unittest.main()
