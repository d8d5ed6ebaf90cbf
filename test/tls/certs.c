/* SPDX-License-Identifier: MIT */
/* certs.c - see certs.h. */
#include "certs.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#define DAY_S (24L * 3600)

typedef struct issued {
    X509 *cert;
    EVP_PKEY *key;
} issued;

static void issued_free(issued *i)
{
    X509_free(i->cert);
    EVP_PKEY_free(i->key);
    i->cert = NULL;
    i->key = NULL;
}

static bool add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (ext == NULL)
        return false;
    bool ok = X509_add_ext(cert, ext, -1) == 1;
    X509_EXTENSION_free(ext);
    return ok;
}

/* A certificate for cn with a fresh key, valid from now + from_s to now + to_s, signed by
 * issuer (NULL: self-signed CA). san may be NULL; usage is "server", "client" or "ca". */
static bool make(issued *out, const issued *issuer, const char *cn, const char *san,
                 const char *usage, long from_s, long to_s, long serial)
{
    out->key = EVP_EC_gen("P-256");
    out->cert = X509_new();
    if (out->key == NULL || out->cert == NULL)
        return false;
    X509 *c = out->cert;
    X509_NAME *name = X509_NAME_new();
    bool ok =
        name != NULL && X509_set_version(c, 2) == 1 &&
        ASN1_INTEGER_set(X509_get_serialNumber(c), serial) == 1 &&
        X509_gmtime_adj(X509_getm_notBefore(c), from_s) != NULL &&
        X509_gmtime_adj(X509_getm_notAfter(c), to_s) != NULL &&
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1,
                                   0) == 1 &&
        X509_set_subject_name(c, name) == 1 &&
        X509_set_issuer_name(c, issuer != NULL ? X509_get_subject_name(issuer->cert) : name) == 1 &&
        X509_set_pubkey(c, out->key) == 1;
    X509_NAME_free(name);
    if (!ok)
        return false;
    X509 *signer_cert = issuer != NULL ? issuer->cert : c;
    EVP_PKEY *signer_key = issuer != NULL ? issuer->key : out->key;
    bool ca = strcmp(usage, "ca") == 0;
    ok = add_ext(c, signer_cert, NID_basic_constraints, ca ? "critical,CA:TRUE" : "CA:FALSE") &&
         add_ext(c, signer_cert, NID_key_usage,
                 ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature") &&
         add_ext(c, signer_cert, NID_subject_key_identifier, "hash") &&
         (ca || add_ext(c, signer_cert, NID_authority_key_identifier, "keyid:always")) &&
         (ca || add_ext(c, signer_cert, NID_ext_key_usage,
                        strcmp(usage, "server") == 0 ? "serverAuth" : "clientAuth")) &&
         (san == NULL || add_ext(c, signer_cert, NID_subject_alt_name, san));
    return ok && X509_sign(c, signer_key, EVP_sha256()) > 0;
}

static bool write_pem(const char *dir, const char *name, const issued *i, bool with_key)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s.crt", dir, name);
    FILE *f = fopen(path, "we");
    bool ok = f != NULL && PEM_write_X509(f, i->cert) == 1;
    if (f != NULL && fclose(f) != 0)
        ok = false;
    if (!ok || !with_key)
        return ok;
    snprintf(path, sizeof(path), "%s/%s.key", dir, name);
    f = fopen(path, "we");
    ok = f != NULL && chmod(path, 0600) == 0 &&
         PEM_write_PrivateKey(f, i->key, NULL, NULL, 0, NULL, NULL) == 1;
    if (f != NULL && fclose(f) != 0)
        ok = false;
    return ok;
}

/* ca-dir/<subject hash>.0, as c_rehash makes it: what a CA directory must hold. */
static bool write_ca_dir(const char *dir, const issued *ca)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/ca-dir", dir);
    if (mkdir(path, 0700) != 0)
        return false;
    snprintf(path, sizeof(path), "%s/ca-dir/%08lx.0", dir, X509_subject_name_hash(ca->cert));
    FILE *f = fopen(path, "we");
    bool ok = f != NULL && PEM_write_X509(f, ca->cert) == 1;
    if (f != NULL && fclose(f) != 0)
        ok = false;
    return ok;
}

int tls_certs_make(const char *dir, char *err, size_t err_len)
{
    static const char local_san[] = "DNS:localhost,IP:127.0.0.1,IP:::1";
    issued ca = {0}, other_ca = {0}, leaf = {0};
    const char *step = "the CA";
    bool ok = make(&ca, NULL, "redlock test CA", NULL, "ca", -DAY_S, 30 * DAY_S, 1) &&
              write_pem(dir, "ca", &ca, false) && write_ca_dir(dir, &ca);
    if (ok) {
        step = "the unrelated CA";
        ok = make(&other_ca, NULL, "redlock unrelated CA", NULL, "ca", -DAY_S, 30 * DAY_S, 2) &&
             write_pem(dir, "other-ca", &other_ca, false);
    }
    static const struct {
        const char *file, *cn, *san, *usage;
        bool other_ca;
        long from_s, to_s;
    } leaves[] = {
        {"server", "localhost", local_san, "server", false, -DAY_S, 30 * DAY_S},
        {"client", "redlock-test-client", NULL, "client", false, -DAY_S, 30 * DAY_S},
        {"other-server", "localhost", local_san, "server", true, -DAY_S, 30 * DAY_S},
        {"other-client", "redlock-other-client", NULL, "client", true, -DAY_S, 30 * DAY_S},
        {"wrongname", "wrong.example", "DNS:wrong.example", "server", false, -DAY_S, 30 * DAY_S},
        {"cn-only", "localhost", NULL, "server", false, -DAY_S, 30 * DAY_S},
        {"expired", "localhost", "DNS:localhost,IP:127.0.0.1", "server", false, -30 * DAY_S,
         -DAY_S},
    };
    for (size_t k = 0; ok && k < sizeof(leaves) / sizeof(leaves[0]); k++) {
        step = leaves[k].file;
        ok = make(&leaf, leaves[k].other_ca ? &other_ca : &ca, leaves[k].cn, leaves[k].san,
                  leaves[k].usage, leaves[k].from_s, leaves[k].to_s, (long)(10 + k)) &&
             write_pem(dir, leaves[k].file, &leaf, true);
        issued_free(&leaf);
    }
    issued_free(&ca);
    issued_free(&other_ca);
    if (!ok) {
        unsigned long e = ERR_peek_last_error();
        snprintf(err, err_len, "certs: cannot make %s in %s (%s)", step, dir,
                 e != 0 ? ERR_reason_error_string(e) : "file error");
        ERR_clear_error();
        return -1;
    }
    return 0;
}
