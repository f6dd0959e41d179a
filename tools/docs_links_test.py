"""Every relative link in README.md, REPRODUCTIONS.md and docs/*.md resolves: the
file or folder exists, and a #fragment names a heading of the page it points at
(GitHub's anchors: lower case, punctuation dropped, spaces as hyphens). Links to
the web are not fetched (the tests run offline). Code blocks and inline code are
not read as links.

The links point all over the tree, which Bazel's runfiles cannot hold, so the test
reads the source tree the README it is given comes from (tagged "external": never
cached, it checks the tree as it is)."""

import os
import re
import sys
import unittest

LINK = re.compile(r'(?<!\\)\[[^\]\n]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)')
FENCE = re.compile(r'^\s*(```|~~~)')
INLINE_CODE = re.compile(r'`[^`\n]*`')


def source_root():
  readme = os.path.join(os.environ.get('TEST_SRCDIR', '.'), os.environ.get('TEST_WORKSPACE', 'fedkit'),
                        'README.md')
  if not os.path.exists(readme):
    readme = 'README.md'
  root = os.path.dirname(os.path.realpath(readme))
  if not os.path.exists(os.path.join(root, 'WORKSPACE')):
    raise SystemExit(f'cannot find the source tree from {readme} (resolved to {root})')
  return root


def anchor(heading):
  text = re.sub(r'[`*_]', '', heading.strip().lower())
  text = re.sub(r'[^\w\- ]', '', text)
  return text.replace(' ', '-')


def anchors(path, cache={}):  # pylint: disable=dangerous-default-value
  if path not in cache:
    found, seen, in_code = set(), {}, False
    with open(path, encoding='utf-8') as f:
      for line in f:
        if FENCE.match(line):
          in_code = not in_code
        elif not in_code and line.startswith('#'):
          base = anchor(line.lstrip('#'))
          n = seen.get(base, 0)
          seen[base] = n + 1
          found.add(base if n == 0 else f'{base}-{n}')
    cache[path] = found
  return cache[path]


def links(path):
  """(line number, target) of every link outside code."""
  in_code = False
  with open(path, encoding='utf-8') as f:
    for number, line in enumerate(f, 1):
      if FENCE.match(line):
        in_code = not in_code
        continue
      if in_code:
        continue
      for match in LINK.finditer(INLINE_CODE.sub('', line)):
        yield number, match.group(1)


def broken(root, page):
  problems = []
  for number, target in links(page):
    if re.match(r'^[a-z][a-z0-9+.-]*:', target):  # http:, https:, mailto:
      continue
    path, _, fragment = target.partition('#')
    resolved = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
    where = f'{os.path.relpath(page, root)}:{number}: ({target})'
    if not os.path.exists(resolved):
      problems.append(f'{where} no such file or folder')
    elif fragment and resolved.endswith('.md') and fragment not in anchors(resolved):
      problems.append(f'{where} no heading "#{fragment}" in {os.path.relpath(resolved, root)}')
  return problems


class DocsLinksTest(unittest.TestCase):

  def test_every_relative_link_resolves(self):
    root = source_root()
    pages = [os.path.join(root, 'README.md'), os.path.join(root, 'REPRODUCTIONS.md')]
    docs = os.path.join(root, 'docs')
    pages += sorted(os.path.join(docs, name) for name in os.listdir(docs) if name.endswith('.md'))
    problems = [p for page in pages for p in broken(root, page)]
    checked = sum(1 for page in pages for _ in links(page))
    self.assertGreater(checked, 100, 'too few links found: is the parser reading the pages?')
    self.assertEqual(problems, [], '\n'.join([f'{len(problems)} broken links:'] + problems))

  def test_the_checker_sees_a_broken_link_and_a_missing_heading(self):
    root = source_root()
    page = os.path.join(os.environ.get('TEST_TMPDIR', '/tmp'), 'docs_links_probe.md')
    with open(page, 'w', encoding='utf-8') as f:
      f.write('# Probe\n\n## A heading, with `code`\n\n[ok](#a-heading-with-code) '
              '[gone](no_such_page.md) [bad anchor](#nowhere) `[in code](nowhere.md)`\n'
              '```\n[in a block](nowhere.md)\n```\n')
    problems = broken(root, page)
    self.assertEqual(len(problems), 2, problems)
    self.assertIn('no such file or folder', problems[0])
    self.assertIn('no heading "#nowhere"', problems[1])

  def test_the_readme_stays_short(self):
    with open(os.path.join(source_root(), 'README.md'), encoding='utf-8') as f:
      self.assertLess(len(f.read().splitlines()), 150)


if __name__ == '__main__':
  sys.exit(unittest.main())
