#include "fl/deploy/tls.h"

#include "absl/strings/str_cat.h"
#include "fl/index_files.h"

namespace fl::deploy {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& field, const std::string& path) {
  absl::StatusOr<std::string> text = ReadTextFile(ResolveUserPath(path), field);
  if (!text.ok()) return text.status();
  if (text->find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(field, " ", path, ": not a PEM file"));
  }
  return text;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerTls(const TlsFiles& files) {
  if (files.cert.empty() || files.key.empty()) {
    return absl::InvalidArgumentError("TLS: the server needs its cert and key");
  }
  grpc::SslServerCredentialsOptions options(
      files.ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                       : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  absl::StatusOr<std::string> cert = ReadPem("cert", files.cert);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem("key", files.key);
  if (!key.ok()) return key.status();
  pair.cert_chain = *std::move(cert);
  pair.private_key = *std::move(key);
  options.pem_key_cert_pairs.push_back(std::move(pair));
  if (!files.ca.empty()) {
    absl::StatusOr<std::string> ca = ReadPem("ca", files.ca);
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *std::move(ca);
  }
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientTls(const TlsFiles& files) {
  if (files.ca.empty()) {
    return absl::InvalidArgumentError("TLS: a client needs the CA that signed the server's cert");
  }
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError("TLS: a client's cert and key go together");
  }
  grpc::SslCredentialsOptions options;
  absl::StatusOr<std::string> ca = ReadPem("ca", files.ca);
  if (!ca.ok()) return ca.status();
  options.pem_root_certs = *std::move(ca);
  if (!files.cert.empty()) {
    absl::StatusOr<std::string> cert = ReadPem("cert", files.cert);
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem("key", files.key);
    if (!key.ok()) return key.status();
    options.pem_cert_chain = *std::move(cert);
    options.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(options);
}

}  // namespace fl::deploy
