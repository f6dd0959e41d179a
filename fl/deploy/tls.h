#ifndef FL_DEPLOY_TLS_H_
#define FL_DEPLOY_TLS_H_

// TLS for the deployment's connections, from PEM files. Every connection is
// encrypted and the server authenticated by a CA the client trusts; with a CA on
// the server's side too, clients must present a certificate it signed (mutual
// TLS), on top of their per-client tokens.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace fl::deploy {

struct TlsFiles {
  // This side's certificate chain and private key: required on the server,
  // optional on a client (then it presents none).
  std::string cert;
  std::string key;
  // The CA that signs the other side's certificate: required on a client (to
  // verify the server); on the server, set to require client certificates.
  std::string ca;
};

// Errors name the flag-like field ("cert", "key", "ca") and the file.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerTls(const TlsFiles& files);
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientTls(const TlsFiles& files);

}  // namespace fl::deploy

#endif  // FL_DEPLOY_TLS_H_
