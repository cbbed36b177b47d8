#include "remote/redis_tls.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace rw::remote {
namespace {

struct SslDeleter {
  void operator()(SSL* s) const { SSL_free(s); }
};
using SslPtr = std::unique_ptr<SSL, SslDeleter>;

// What OpenSSL's error queue of this thread says (emptied), or `fallback`.
std::string SslErrors(const std::string& fallback) {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(e);
    char full[256];
    if (!reason) {
      ERR_error_string_n(e, full, sizeof(full));
      reason = full;
    }
    out += (out.empty() ? "" : "; ") + std::string(reason);
  }
  return out.empty() ? fallback : out;
}

// OpenSSL's socket BIO writes with write(2), which raises SIGPIPE when the server has gone; this one sends
// with MSG_NOSIGNAL and takes everything else from the socket BIO.
int SendNoSignal(BIO* bio, const char* data, int len) {
  int fd = -1;
  BIO_get_fd(bio, &fd);
  errno = 0;
  const ssize_t n = send(fd, data, static_cast<size_t>(len), MSG_NOSIGNAL);
  BIO_clear_retry_flags(bio);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) BIO_set_retry_write(bio);
  return static_cast<int>(n);
}

const BIO_METHOD* SocketMethod() {
  static BIO_METHOD* method = [] {
    const BIO_METHOD* base = BIO_s_socket();
    BIO_METHOD* m =
        BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR, "rewind socket");
    BIO_meth_set_write(m, SendNoSignal);
    BIO_meth_set_read(m, BIO_meth_get_read(base));
    BIO_meth_set_puts(m, BIO_meth_get_puts(base));
    BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(base));
    BIO_meth_set_create(m, BIO_meth_get_create(base));
    BIO_meth_set_destroy(m, BIO_meth_get_destroy(base));
    return m;
  }();
  return method;
}

bool IsIpAddress(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// Why an SSL operation failed with `code` (drains the error queue; errno was cleared before the operation).
std::string Why(SSL* ssl, int code) {
  const int e = errno;
  if (const long v = SSL_get_verify_result(ssl); v != X509_V_OK) {
    ERR_clear_error();
    return std::string("the server's certificate did not verify: ") + X509_verify_cert_error_string(v);
  }
  if (code == SSL_ERROR_SYSCALL)
    return SslErrors(e == 0 ? "the server closed the connection" : std::strerror(e));
  return SslErrors("TLS error " + std::to_string(code));
}

class TlsTransport final : public Transport {
 public:
  TlsTransport(Socket socket, SslPtr ssl, std::shared_ptr<TlsContext> context)
      : socket_(std::move(socket)), ssl_(std::move(ssl)), context_(std::move(context)) {}
  ~TlsTransport() override {
    if (!failed_) SSL_shutdown(ssl_.get());  // a close_notify, without waiting for the server's
  }

  Status WriteAll(std::string_view data, Deadline deadline) override {
    while (!data.empty()) {
      REWIND_ASSIGN_OR_RETURN(
          const size_t n,
          Drive([&](size_t* done) { return SSL_write_ex(ssl_.get(), data.data(), data.size(), done); },
                deadline, "writing"));
      data.remove_prefix(n);
    }
    return Status::Ok();
  }

  Expected<size_t> Read(std::span<char> buf, Deadline deadline) override {
    return Drive([&](size_t* done) { return SSL_read_ex(ssl_.get(), buf.data(), buf.size(), done); },
                 deadline, "reading");
  }

 private:
  // Runs one SSL operation to completion, waiting for the socket whichever way OpenSSL asks.
  template <typename Op>
  Expected<size_t> Drive(Op op, Deadline deadline, const char* what) {
    if (failed_) return Error::Unavailable("the TLS connection failed earlier");
    for (;;) {
      ERR_clear_error();
      errno = 0;
      size_t done = 0;
      const int r = op(&done);
      if (r == 1) return done;
      int code = SSL_get_error(ssl_.get(), r);
      if (code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE) {
        REWIND_RETURN_IF_ERROR(socket_.Wait(code == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline, what));
        continue;
      }
      failed_ = true;
      if (code == SSL_ERROR_ZERO_RETURN) return Error::Unavailable("the server closed the TLS connection");
      std::string why = Why(ssl_.get(), code);
      if (code == SSL_ERROR_SYSCALL) {
        // A TLS 1.3 server refuses a client (no client certificate) after the client's handshake has ended:
        // it sends an alert and closes, and a write may then fail first. The alert says why, when it has
        // arrived.
        char buf[512];
        size_t n = 0;
        ERR_clear_error();
        errno = 0;
        if (const int r2 = SSL_read_ex(ssl_.get(), buf, sizeof(buf), &n);
            r2 != 1 && SSL_get_error(ssl_.get(), r2) == SSL_ERROR_SSL) {
          code = SSL_ERROR_SSL;
          why = Why(ssl_.get(), code);
        }
        ERR_clear_error();
      }
      if (code == SSL_ERROR_SSL) context_->CountFailure();  // an alert or a broken record, not a mere reset
      return Error::Unavailable(std::string("TLS ") + what + " failed: " + why);
    }
  }

  Socket socket_;
  SslPtr ssl_;
  std::shared_ptr<TlsContext> context_;
  bool failed_ = false;
};

}  // namespace

Expected<std::shared_ptr<TlsContext>> TlsContext::Create(const TlsOptions& options) {
  if (options.cert_file.empty() != options.key_file.empty())
    return Error::InvalidArgument("a TLS client certificate needs both its certificate and its key file");
  ERR_clear_error();
  SSL_CTX* raw = SSL_CTX_new(TLS_client_method());
  if (!raw) return Error::Internal("cannot create a TLS context: " + SslErrors("out of memory"));
  std::shared_ptr<TlsContext> ctx(new TlsContext(raw));
  SSL_CTX_set_min_proto_version(raw, TLS1_2_VERSION);
  SSL_CTX_set_verify(raw, SSL_VERIFY_PEER, nullptr);
  SSL_CTX_set_mode(raw, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // A server that closes without close_notify is a closed connection, not a TLS failure (RESP frames itself,
  // so a truncated stream is detected anyway).
  SSL_CTX_set_options(raw, SSL_OP_IGNORE_UNEXPECTED_EOF);
  const bool ca_ok = options.ca_file.empty()
                         ? SSL_CTX_set_default_verify_paths(raw) == 1
                         : SSL_CTX_load_verify_locations(raw, options.ca_file.c_str(), nullptr) == 1;
  if (!ca_ok)
    return Error::InvalidArgument(
        "cannot load the TLS CA certificates " +
        (options.ca_file.empty() ? std::string("of the system") : "from " + options.ca_file) + ": " +
        SslErrors("unknown error"));
  if (!options.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(raw, options.cert_file.c_str()) != 1)
      return Error::InvalidArgument("cannot load the TLS client certificate " + options.cert_file + ": " +
                                    SslErrors("unknown error"));
    if (SSL_CTX_use_PrivateKey_file(raw, options.key_file.c_str(), SSL_FILETYPE_PEM) != 1)
      return Error::InvalidArgument("cannot load the TLS client key " + options.key_file + ": " +
                                    SslErrors("unknown error"));
    if (SSL_CTX_check_private_key(raw) != 1)
      return Error::InvalidArgument("the TLS client key " + options.key_file +
                                    " does not match the certificate " + options.cert_file);
  }
  return ctx;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

Expected<std::unique_ptr<Transport>> TlsContext::Handshake(Socket socket, const std::string& host,
                                                           Deadline deadline) {
  ERR_clear_error();
  SslPtr ssl(SSL_new(ctx_));
  BIO* bio = ssl ? BIO_new(SocketMethod()) : nullptr;
  if (!bio) return Error::Internal("cannot create a TLS session: " + SslErrors("out of memory"));
  BIO_set_fd(bio, socket.fd(), BIO_NOCLOSE);
  SSL_set_bio(ssl.get(), bio, bio);
  // The certificate must name what the client dialled: an IP address as an IP SAN, a name as a DNS SAN (and
  // only a name goes into SNI).
  const bool named = IsIpAddress(host)
                         ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl.get()), host.c_str()) == 1
                         : SSL_set_tlsext_host_name(ssl.get(), host.c_str()) == 1 &&
                               SSL_set1_host(ssl.get(), host.c_str()) == 1;
  if (!named) return Error::InvalidArgument("cannot verify TLS for host '" + host + "'");
  for (;;) {
    ERR_clear_error();
    errno = 0;
    const int r = SSL_connect(ssl.get());
    if (r == 1) break;
    const int code = SSL_get_error(ssl.get(), r);
    if (code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE) {
      REWIND_RETURN_IF_ERROR(socket.Wait(code == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline,
                                         "waiting for the TLS handshake"));
      continue;
    }
    CountFailure();
    return Error::Unavailable("TLS handshake with " + host + " failed: " + Why(ssl.get(), code));
  }
  return std::unique_ptr<Transport>(
      std::make_unique<TlsTransport>(std::move(socket), std::move(ssl), shared_from_this()));
}

}  // namespace rw::remote
