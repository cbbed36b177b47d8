// Test helper: certificates for TLS tests, made by the openssl command in a temporary folder (P-256 keys, so
// it takes milliseconds): a CA, a server certificate it signed for 127.0.0.1 and localhost, one it signed for
// another name only, a client certificate it signed, and a second CA that signed none of them. Tests that
// need it skip (and say why) where openssl or a TLS-capable redis-server is missing.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include "remote/redis_test_server.h"

namespace rw::remote::testing {

inline bool OpensslInstalled() { return std::system("command -v openssl >/dev/null 2>&1") == 0; }

// redis-server built with TLS (Debian 12's is): it links libssl.
inline bool RedisServerHasTls() {
  return std::system("ldd \"$(command -v redis-server)\" 2>/dev/null | grep -q libssl") == 0;
}

#define REWIND_REQUIRE_REDIS_TLS()                                                               \
  do {                                                                                           \
    REWIND_REQUIRE_REDIS();                                                                      \
    if (!::rw::remote::testing::OpensslInstalled())                                              \
      GTEST_SKIP() << "openssl (the command) is not installed (scripts/install-deps.sh)";        \
    if (!::rw::remote::testing::RedisServerHasTls())                                             \
      GTEST_SKIP() << "this redis-server is built without TLS (Debian 12's has it: --tls-port)"; \
  } while (0)

class TlsTestCerts {
 public:
  TlsTestCerts() {
    char tmpl[] = "/tmp/rewind-tls-XXXXXX";
    dir = mkdtemp(tmpl) ? tmpl : "";
    if (dir.empty()) return;
    // A key and certificate request: $1 name, $2 subject. A certificate signed by the CA: $1 name, $2 SANs.
    const std::string script =
        "cd '" + dir +
        "' && set -e && "
        "key() { openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout $1.key "
        "-out $1.csr -subj \"$2\"; } && "
        "sign() { printf '%s\\n' \"$2\" > $1.ext; openssl x509 -req -in $1.csr -CA ca.crt -CAkey ca.key "
        "-CAcreateserial -days 2 -out $1.crt -extfile $1.ext; } && "
        "for ca in ca other-ca; do openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "-keyout $ca.key -out $ca.crt -days 2 -subj /CN=rewind-test-$ca; done && "
        "key server /CN=localhost && sign server subjectAltName=IP:127.0.0.1,DNS:localhost && "
        "key elsewhere /CN=elsewhere.invalid && sign elsewhere subjectAltName=DNS:elsewhere.invalid && "
        "key client /CN=rewind-client && sign client basicConstraints=CA:FALSE";
    ok = std::system(("(" + script + ") >'" + dir + "/openssl.log' 2>&1").c_str()) == 0;
  }
  ~TlsTestCerts() {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
  TlsTestCerts(const TlsTestCerts&) = delete;
  TlsTestCerts& operator=(const TlsTestCerts&) = delete;

  std::string File(const std::string& name) const { return dir + "/" + name; }
  std::string ca() const { return File("ca.crt"); }
  std::string other_ca() const { return File("other-ca.crt"); }
  // The server side of a TLS port: the certificate for 127.0.0.1 and localhost (or, `elsewhere`, the one for
  // another name only).
  RedisTls Server(bool auth_clients = false, bool cluster = false, bool elsewhere = false) const {
    const std::string name = elsewhere ? "elsewhere" : "server";
    return RedisTls{ca(), File(name + ".crt"), File(name + ".key"), auth_clients, cluster};
  }
  // Client-side options: verify with our CA (or the other one), present the client certificate or not.
  TlsOptions Client(bool with_cert = false, bool other = false) const {
    TlsOptions o;
    o.ca_file = other ? other_ca() : ca();
    if (with_cert) {
      o.cert_file = File("client.crt");
      o.key_file = File("client.key");
    }
    return o;
  }

  std::string dir;
  bool ok = false;
};

}  // namespace rw::remote::testing
