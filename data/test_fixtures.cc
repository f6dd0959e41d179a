#include "data/test_fixtures.h"

#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <glog/logging.h>

namespace data::fixtures {

std::string TestDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  std::filesystem::create_directories(dir);
  return dir;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), bytes.size());
  CHECK(out.good()) << "cannot write " << path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  CHECK(in.good()) << "cannot read " << path;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void GzipInPlace(const std::string& path) {
  const std::string bytes = ReadFile(path);
  gzFile gz = gzopen((path + ".gz").c_str(), "wb1");
  CHECK(gz != nullptr) << "cannot write " << path << ".gz";
  CHECK_EQ(gzwrite(gz, bytes.data(), bytes.size()), static_cast<int>(bytes.size()));
  CHECK_EQ(gzclose(gz), Z_OK);
  std::filesystem::remove(path);
}

void Truncate(const std::string& path, size_t bytes) {
  const std::string content = ReadFile(path);
  CHECK_GE(content.size(), bytes);
  WriteFile(path, content.substr(0, content.size() - bytes));
}

std::string CifarRecord(const std::string& labels, uint8_t red) {
  std::string image;
  for (int c = 0; c < 3; ++c) image.append(1024, static_cast<char>(red + c));
  image[0] = static_cast<char>(255);
  return labels + image;
}

}  // namespace data::fixtures
