/* SPDX-License-Identifier: MIT */
/* tls.c - OpenSSL on memory BIOs for a node's stream. See tls.h. */
#include "tls.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <uv.h> /* uv_inet_pton */

#if REDLOCK_WITH_TLS

#include <openssl/err.h>
#include <openssl/opensslv.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#define PLAIN_CHUNK 16384 /* one TLS record's worth of plaintext per SSL_read */

struct redlock__tls_ctx {
    SSL_CTX *ssl_ctx;
    const redlock__alloc *alloc;
    char *server_name; /* the override, or NULL */
    bool insecure;
    bool has_cert;
};

struct redlock__tls {
    SSL *ssl;
    BIO *rbio; /* ciphertext from the socket (owned by ssl) */
    BIO *wbio; /* ciphertext for the socket (owned by ssl) */
    redlock__tls_ctx *ctx;
    redlock__tls_resume *resume;
    bool cert_requested; /* the server asked for a client certificate */
    char name[256];      /* what the certificate must match, for messages */
    char plain[PLAIN_CHUNK];
};

bool redlock__tls_built_in(void)
{
    return true;
}

const char *redlock_tls_backend(void)
{
    return OpenSSL_version(OPENSSL_VERSION);
}

/* ---- the context --------------------------------------------------------------------------- */

/* OpenSSL's reason for the last error on this thread's queue, and clear the queue. */
static const char *last_reason(void)
{
    unsigned long e = ERR_peek_last_error();
    const char *reason = e != 0 ? ERR_reason_error_string(e) : NULL;
    ERR_clear_error();
    return reason != NULL ? reason : "unknown error";
}

/* A session the server handed out (at the end of a TLS 1.2 handshake, or as a TLS 1.3 ticket
 * after it): keep the newest for the node's next connection. A copy, because OpenSSL marks the
 * session of a connection that ends without a TLS shutdown as not resumable (SSL_free), and a
 * network blip - the very case resumption is for - ends connections that way. A connection that
 * fails at the TLS level forgets the session instead (forget_session). */
static int on_new_session(SSL *ssl, SSL_SESSION *session)
{
    redlock__tls *t = SSL_get_app_data(ssl);
    if (t == NULL || t->resume == NULL || !SSL_SESSION_is_resumable(session))
        return 0;
    SSL_SESSION *copy = SSL_SESSION_dup(session);
    if (copy == NULL)
        return 0; /* the next connection makes a full handshake */
    if (t->resume->session != NULL)
        SSL_SESSION_free(t->resume->session);
    t->resume->session = copy;
    return 0;
}

/* Never prompt on the terminal for a key's passphrase (OpenSSL's default): encrypted keys are
 * refused instead. */
static int no_passphrase(char *buf, int size, int rwflag, void *ud)
{
    (void)buf, (void)size, (void)rwflag, (void)ud;
    return 0;
}

static int load_files(redlock__tls_ctx *ctx, const redlock_options *o, char *err, size_t err_len)
{
    SSL_CTX *sc = ctx->ssl_ctx;
    if (o->tls_ca_file != NULL && SSL_CTX_load_verify_file(sc, o->tls_ca_file) != 1) {
        redlock__fmt(err, err_len, "tls_ca_file: cannot load %s (%s)", o->tls_ca_file,
                     last_reason());
        return REDLOCK_EINVAL;
    }
    if (o->tls_ca_dir != NULL) {
        /* OpenSSL reads a CA directory lazily, at each verification: check it now. */
        struct stat st;
        int rc = stat(o->tls_ca_dir, &st);
        if (rc != 0 || !S_ISDIR(st.st_mode)) {
            redlock__fmt(err, err_len, "tls_ca_dir: cannot use %s (%s)", o->tls_ca_dir,
                         rc != 0 ? strerror(errno) : "not a directory");
            return REDLOCK_EINVAL;
        }
        if (SSL_CTX_load_verify_dir(sc, o->tls_ca_dir) != 1) {
            redlock__fmt(err, err_len, "tls_ca_dir: cannot use %s (%s)", o->tls_ca_dir,
                         last_reason());
            return REDLOCK_EINVAL;
        }
    }
    if (o->tls_ca_file == NULL && o->tls_ca_dir == NULL &&
        SSL_CTX_set_default_verify_paths(sc) != 1) {
        redlock__fmt(err, err_len, "tls: cannot load the system's CA store (%s)", last_reason());
        return REDLOCK_EINVAL;
    }
    if ((o->tls_cert_file == NULL) != (o->tls_key_file == NULL)) {
        redlock__fmt(err, err_len, "tls_cert_file and tls_key_file go together (mutual TLS)");
        return REDLOCK_EINVAL;
    }
    if (o->tls_cert_file == NULL)
        return 0;
    if (SSL_CTX_use_certificate_chain_file(sc, o->tls_cert_file) != 1) {
        redlock__fmt(err, err_len, "tls_cert_file: cannot load %s (%s)", o->tls_cert_file,
                     last_reason());
        return REDLOCK_EINVAL;
    }
    /* The key's path is not repeated in messages: the caller knows it, logs need not. */
    if (SSL_CTX_use_PrivateKey_file(sc, o->tls_key_file, SSL_FILETYPE_PEM) != 1) {
        if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
            ERR_clear_error();
            redlock__fmt(err, err_len,
                         "tls_key_file: the private key does not match tls_cert_file");
            return REDLOCK_EINVAL;
        }
        redlock__fmt(err, err_len,
                     "tls_key_file: cannot load the private key (%s; keys with a passphrase are "
                     "not supported)",
                     last_reason());
        return REDLOCK_EINVAL;
    }
    if (SSL_CTX_check_private_key(sc) != 1) {
        ERR_clear_error();
        redlock__fmt(err, err_len, "tls_key_file: the private key does not match tls_cert_file");
        return REDLOCK_EINVAL;
    }
    ctx->has_cert = true;
    return 0;
}

int redlock__tls_ctx_new(const redlock_options *o, const redlock__alloc *alloc,
                         redlock__tls_ctx **out, char *err, size_t err_len)
{
    *out = NULL;
    if (o->tls_server_name != NULL &&
        (o->tls_server_name[0] == '\0' || strlen(o->tls_server_name) > 253)) {
        redlock__fmt(err, err_len, "tls_server_name must be 1..253 bytes");
        return REDLOCK_EINVAL;
    }
    redlock__tls_ctx *ctx = redlock__calloc(alloc, 1, sizeof(*ctx));
    if (ctx == NULL) {
        redlock__fmt(err, err_len, "out of memory");
        return REDLOCK_ENOMEM;
    }
    ctx->alloc = alloc;
    ctx->insecure = o->tls_insecure;
    ERR_clear_error();
    ctx->ssl_ctx = SSL_CTX_new(TLS_client_method());
    if (ctx->ssl_ctx == NULL ||
        (o->tls_server_name != NULL &&
         (ctx->server_name = redlock__strdup(alloc, o->tls_server_name)) == NULL)) {
        ERR_clear_error();
        redlock__tls_ctx_free(ctx);
        redlock__fmt(err, err_len, "out of memory");
        return REDLOCK_ENOMEM;
    }
    SSL_CTX *sc = ctx->ssl_ctx;
    SSL_CTX_set_min_proto_version(sc, TLS1_2_VERSION);
    SSL_CTX_set_verify(sc, ctx->insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_default_passwd_cb(sc, no_passphrase);
    /* Sessions go to the node that made them (on_new_session), not to a cache in the context:
     * each node resumes its own server's session. */
    SSL_CTX_set_session_cache_mode(sc, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(sc, on_new_session);
    int rc = load_files(ctx, o, err, err_len);
    if (rc != 0) {
        redlock__tls_ctx_free(ctx);
        return rc;
    }
    *out = ctx;
    return 0;
}

void redlock__tls_ctx_free(redlock__tls_ctx *ctx)
{
    if (ctx == NULL)
        return;
    SSL_CTX_free(ctx->ssl_ctx);
    redlock__free(ctx->alloc, ctx->server_name);
    redlock__free(ctx->alloc, ctx);
}

bool redlock__tls_ctx_insecure(const redlock__tls_ctx *ctx)
{
    return ctx != NULL && ctx->insecure;
}

/* ---- a connection -------------------------------------------------------------------------- */

/* Called when the server asks for a client certificate (so a later handshake failure alert can
 * be read as "it wanted one"). */
static int on_cert_request(SSL *ssl, void *arg)
{
    (void)ssl;
    ((redlock__tls *)arg)->cert_requested = true;
    return 1;
}

static bool is_ip_literal(const char *host)
{
    unsigned char addr[16];
    return uv_inet_pton(AF_INET, host, addr) == 0 || uv_inet_pton(AF_INET6, host, addr) == 0;
}

int redlock__tls_new(redlock__tls_ctx *ctx, const char *host, redlock__tls_resume *resume,
                     redlock__tls **out, char *why, size_t why_len)
{
    *out = NULL;
    redlock__tls *t = redlock__calloc(ctx->alloc, 1, sizeof(*t));
    if (t == NULL) {
        redlock__fmt(why, why_len, "tls: out of memory");
        return REDLOCK_ENOMEM;
    }
    t->ctx = ctx;
    t->resume = resume;
    const char *name = ctx->server_name != NULL ? ctx->server_name : host;
    redlock__fmt(t->name, sizeof(t->name), "%s", name);
    ERR_clear_error();
    t->ssl = SSL_new(ctx->ssl_ctx);
    t->rbio = BIO_new(BIO_s_mem());
    t->wbio = BIO_new(BIO_s_mem());
    if (t->ssl == NULL || t->rbio == NULL || t->wbio == NULL) {
        BIO_free(t->rbio);
        BIO_free(t->wbio);
        t->rbio = t->wbio = NULL;
        goto oom;
    }
    /* An empty memory BIO means "no bytes yet", not end of stream. */
    BIO_set_mem_eof_return(t->rbio, -1);
    BIO_set_mem_eof_return(t->wbio, -1);
    SSL_set_bio(t->ssl, t->rbio, t->wbio);
    SSL_set_app_data(t->ssl, t);
    SSL_set_cert_cb(t->ssl, on_cert_request, t);
    SSL_set_connect_state(t->ssl);
    int ok;
    if (is_ip_literal(name)) {
        /* No SNI for addresses (RFC 6066); the address must be among the certificate's IPs. */
        ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl), name);
    } else {
        /* Its DNS names only (RFC 6125): a certificate without any is for no host name, whatever
         * its subject's CN says (OpenSSL would fall back on it). */
        SSL_set_hostflags(t->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS |
                                      X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
        ok = SSL_set_tlsext_host_name(t->ssl, name) == 1 && SSL_set1_host(t->ssl, name) == 1;
    }
    if (ok != 1)
        goto oom;
    if (resume != NULL && resume->session != NULL)
        SSL_set_session(t->ssl, resume->session);
    *out = t;
    return 0;

oom:
    ERR_clear_error();
    redlock__tls_free(t);
    redlock__fmt(why, why_len, "tls: out of memory");
    return REDLOCK_ENOMEM;
}

void redlock__tls_free(redlock__tls *t)
{
    if (t == NULL)
        return;
    SSL_free(t->ssl); /* frees both BIOs */
    redlock__free(t->ctx->alloc, t);
}

int redlock__tls_feed(redlock__tls *t, const char *data, size_t len)
{
    return BIO_write(t->rbio, data, (int)len) == (int)len ? 0 : REDLOCK_ENOMEM;
}

/* The failure's reason as a node error text. */
static void describe(redlock__tls *t, int ssl_error, char *why, size_t why_len)
{
    unsigned long e = ERR_peek_error();
    int reason = ERR_GET_LIB(e) == ERR_LIB_SSL ? ERR_GET_REASON(e) : 0;
    long verify = SSL_get_verify_result(t->ssl);
    if (reason == SSL_R_CERTIFICATE_VERIFY_FAILED && verify != X509_V_OK) {
        if (verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH)
            redlock__fmt(why, why_len, "tls: host name mismatch (the certificate is not for %s)",
                         t->name);
        else
            redlock__fmt(why, why_len, "tls: certificate verify failed (%s)",
                         X509_verify_cert_error_string(verify));
    } else if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_UNKNOWN_PROTOCOL ||
               reason == SSL_R_PACKET_LENGTH_TOO_LONG || reason == SSL_R_RECORD_LENGTH_MISMATCH ||
               reason == SSL_R_WRONG_SSL_VERSION || reason == SSL_R_UNEXPECTED_RECORD) {
        redlock__fmt(why, why_len, "tls: server does not speak TLS (%s)", REDLOCK__TLS_PLAIN_HINT);
    } else if (reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED ||
               (reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE && t->cert_requested &&
                !t->ctx->has_cert)) {
        redlock__fmt(why, why_len, "tls: server requires a client certificate");
    } else if (reason == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE ||
               reason == SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN ||
               reason == SSL_R_TLSV1_ALERT_UNKNOWN_CA ||
               reason == SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED ||
               reason == SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE ||
               reason == SSL_R_TLSV1_ALERT_DECRYPT_ERROR) {
        redlock__fmt(why, why_len, "tls: server rejected the client certificate (%s)",
                     ERR_reason_error_string(e));
    } else if (reason == SSL_R_UNSUPPORTED_PROTOCOL ||
               reason == SSL_R_TLSV1_ALERT_PROTOCOL_VERSION ||
               reason == SSL_R_NO_PROTOCOLS_AVAILABLE) {
        redlock__fmt(why, why_len, "tls: no common protocol version (TLS 1.2 or newer required)");
    } else if (e != 0 && ERR_reason_error_string(e) != NULL) {
        redlock__fmt(why, why_len, "tls: %s", ERR_reason_error_string(e));
    } else {
        redlock__fmt(why, why_len, "tls: failed (SSL error %d)", ssl_error);
    }
    ERR_clear_error();
}

/* A connection failed at the TLS level (an alert, a bad record, a failed verification): its
 * node's next connection starts with a full handshake. */
static void forget_session(redlock__tls *t)
{
    if (t->resume != NULL)
        redlock__tls_resume_clear(t->resume);
}

int redlock__tls_handshake(redlock__tls *t, char *why, size_t why_len)
{
    ERR_clear_error();
    int rc = SSL_do_handshake(t->ssl);
    if (rc == 1)
        return 1;
    int err = SSL_get_error(t->ssl, rc);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
        return 0;
    describe(t, err, why, why_len);
    forget_session(t);
    return -1;
}

int redlock__tls_read(redlock__tls *t, const char **data, size_t *len, char *why, size_t why_len)
{
    ERR_clear_error();
    int n = SSL_read(t->ssl, t->plain, sizeof(t->plain));
    if (n > 0) {
        *data = t->plain;
        *len = (size_t)n;
        return 1;
    }
    int err = SSL_get_error(t->ssl, n);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
        return 0;
    if (err == SSL_ERROR_ZERO_RETURN) {
        ERR_clear_error();
        redlock__fmt(why, why_len, "connection closed by the node (tls close_notify)");
        return -1;
    }
    describe(t, err, why, why_len);
    forget_session(t);
    return -1;
}

int redlock__tls_write(redlock__tls *t, const void *data, size_t len, char *why, size_t why_len)
{
    const char *p = data;
    while (len > 0) {
        int chunk = len > (size_t)(1 << 30) ? 1 << 30 : (int)len;
        ERR_clear_error();
        int n = SSL_write(t->ssl, p, chunk);
        if (n <= 0) {
            describe(t, SSL_get_error(t->ssl, n), why, why_len);
            forget_session(t);
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

size_t redlock__tls_pending(const redlock__tls *t)
{
    return BIO_ctrl_pending(t->wbio);
}

int redlock__tls_take(redlock__tls *t, redlock__buf *out, const redlock__alloc *alloc)
{
    size_t n = BIO_ctrl_pending(t->wbio);
    if (n == 0)
        return 0;
    if (out->cap - out->len < n) {
        size_t cap = REDLOCK__MAX(out->cap * 2, out->len + n);
        char *data = redlock__realloc(alloc, out->data, cap);
        if (data == NULL)
            return REDLOCK_ENOMEM;
        out->data = data;
        out->cap = cap;
    }
    int got = BIO_read(t->wbio, out->data + out->len, (int)n);
    if (got > 0)
        out->len += (size_t)got;
    return 0;
}

bool redlock__tls_resumed(const redlock__tls *t)
{
    return SSL_session_reused(t->ssl) == 1;
}

bool redlock__tls_explain_drop(const redlock__tls *t, char *why, size_t why_len)
{
    if (!t->cert_requested)
        return false;
    if (!t->ctx->has_cert)
        redlock__fmt(why, why_len, "tls: server requires a client certificate");
    else
        redlock__fmt(why, why_len,
                     "tls: server closed the connection after the handshake (did it reject the "
                     "client certificate?)");
    return true;
}

const char *redlock__tls_version(const redlock__tls *t)
{
    return SSL_is_init_finished(t->ssl) ? SSL_get_version(t->ssl) : "";
}

void redlock__tls_resume_clear(redlock__tls_resume *r)
{
    if (r->session != NULL)
        SSL_SESSION_free(r->session);
    r->session = NULL;
}

#else /* !REDLOCK_WITH_TLS: the library was built without OpenSSL. */

bool redlock__tls_built_in(void)
{
    return false;
}

const char *redlock_tls_backend(void)
{
    return NULL;
}

int redlock__tls_ctx_new(const redlock_options *o, const redlock__alloc *alloc,
                         redlock__tls_ctx **out, char *err, size_t err_len)
{
    (void)o, (void)alloc;
    *out = NULL;
    redlock__fmt(err, err_len,
                 "TLS (rediss://) is not built into this library (it was built without OpenSSL)");
    return REDLOCK_EINVAL;
}

void redlock__tls_ctx_free(redlock__tls_ctx *ctx)
{
    (void)ctx;
}

bool redlock__tls_ctx_insecure(const redlock__tls_ctx *ctx)
{
    (void)ctx;
    return false;
}

/* No context can exist, so nothing below is ever reached. */
int redlock__tls_new(redlock__tls_ctx *ctx, const char *host, redlock__tls_resume *resume,
                     redlock__tls **out, char *why, size_t why_len)
{
    (void)ctx, (void)host, (void)resume;
    *out = NULL;
    redlock__fmt(why, why_len, "tls: not built in");
    return REDLOCK_EINVAL;
}

void redlock__tls_free(redlock__tls *t)
{
    (void)t;
}

int redlock__tls_feed(redlock__tls *t, const char *data, size_t len)
{
    (void)t, (void)data, (void)len;
    return REDLOCK_EINVAL;
}

int redlock__tls_handshake(redlock__tls *t, char *why, size_t why_len)
{
    (void)t;
    redlock__fmt(why, why_len, "tls: not built in");
    return -1;
}

int redlock__tls_read(redlock__tls *t, const char **data, size_t *len, char *why, size_t why_len)
{
    (void)t, (void)data, (void)len;
    redlock__fmt(why, why_len, "tls: not built in");
    return -1;
}

int redlock__tls_write(redlock__tls *t, const void *data, size_t len, char *why, size_t why_len)
{
    (void)t, (void)data, (void)len;
    redlock__fmt(why, why_len, "tls: not built in");
    return -1;
}

size_t redlock__tls_pending(const redlock__tls *t)
{
    (void)t;
    return 0;
}

int redlock__tls_take(redlock__tls *t, redlock__buf *out, const redlock__alloc *alloc)
{
    (void)t, (void)out, (void)alloc;
    return 0;
}

bool redlock__tls_resumed(const redlock__tls *t)
{
    (void)t;
    return false;
}

bool redlock__tls_explain_drop(const redlock__tls *t, char *why, size_t why_len)
{
    (void)t, (void)why, (void)why_len;
    return false;
}

const char *redlock__tls_version(const redlock__tls *t)
{
    (void)t;
    return "";
}

void redlock__tls_resume_clear(redlock__tls_resume *r)
{
    r->session = NULL;
}

#endif
