// See include/cwebrtc.h. OpenSSL 3 (DTLS, X.509, EC keys, HMAC, RAND) and libsrtp2 do all the cryptography.
#include "cwebrtc.h"
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/pem.h>
#include <openssl/objects.h>
#include <srtp2/srtp.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CW_QUEUE 32
#define CW_DATAGRAM 1600

struct cw_identity {
    SSL_CTX *ctx;
    int client;
};

struct cw_dtls {
    SSL *ssl;
    int client;
    BIO *rbio;
    char expected[128];
    int mtu;
    int verified;
    int failed;
    int mismatch;            // the peer's certificate did not match `expected` (refused in the handshake)
    long dropped;            // records dropped after the handshake (malformed, too short, wrong epoch, undecryptable)
    char error[256];
    // Outgoing datagrams, one per BIO write (a memory BIO would run DTLS records of a flight together).
    uint8_t queue[CW_QUEUE][CW_DATAGRAM];
    int lengths[CW_QUEUE];
    int head, count;
};

struct cw_srtp {
    srtp_t session;
};

static void fingerprint_of(X509 *cert, char out[128]) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    out[0] = 0;
    if (!X509_digest(cert, EVP_sha256(), md, &n)) return;
    for (unsigned int i = 0; i < n && i * 3 + 3 < 128; i++) snprintf(out + i * 3, 4, i + 1 < n ? "%02X:" : "%02X", md[i]);
}

static void openssl_error(char *error, size_t size, const char *what) {
    unsigned long e = ERR_get_error();
    char buf[200] = "";
    if (e) ERR_error_string_n(e, buf, sizeof buf);
    snprintf(error, size, "%s%s%s", what, e ? ": " : "", buf);
    ERR_clear_error();
}

static int dtls_index = -1;
static pthread_once_t index_once = PTHREAD_ONCE_INIT;
static void index_init(void) { dtls_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL); }

// Self-signed by design: the peer's certificate is good when its SHA-256 fingerprint is the one its SDP named.
// Checked here, during the handshake, so that a mismatch ends it at once with a bad_certificate alert.
static int verify_fingerprint(int ok, X509_STORE_CTX *store) {
    (void)ok;
    if (X509_STORE_CTX_get_error_depth(store) != 0) return 1;   // the chain's other certificates do not matter
    SSL *ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
    cw_dtls *d = ssl && dtls_index >= 0 ? SSL_get_ex_data(ssl, dtls_index) : NULL;
    X509 *cert = X509_STORE_CTX_get_current_cert(store);
    if (!d || !cert) return 0;
    char got[128] = "";
    fingerprint_of(cert, got);
    if (strcasecmp(got, d->expected) == 0) return 1;
    d->mismatch = 1;
    snprintf(d->error, sizeof d->error, "the peer's DTLS certificate (sha-256 %.100s) does not match the fingerprint in its offer (%.100s)",
             got, d->expected);
    X509_STORE_CTX_set_error(store, X509_V_ERR_CERT_REJECTED);   // → a bad_certificate alert
    return 0;
}

// A self-signed X.509 v3 certificate for `key` (not yet signed): a random 128-bit serial, valid from a day ago
// for `days` days, subject and issuer CN=`cn`. NULL on failure.
static X509 *unsigned_certificate(EVP_PKEY *key, const char *cn, long days) {
    X509 *cert = X509_new();
    X509_NAME *name = X509_NAME_new();
    unsigned char serial[16];
    RAND_bytes(serial, sizeof serial);
    serial[0] &= 0x7f;
    BIGNUM *bn = BN_bin2bn(serial, sizeof serial, NULL);
    int ok = cert && name && bn && X509_set_version(cert, 2) && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert))
        && X509_gmtime_adj(X509_getm_notBefore(cert), -86400) && X509_gmtime_adj(X509_getm_notAfter(cert), days * 86400)
        && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0)
        && X509_set_subject_name(cert, name) && X509_set_issuer_name(cert, name) && X509_set_pubkey(cert, key);
    BN_free(bn);
    X509_NAME_free(name);
    if (!ok) { X509_free(cert); return NULL; }
    return cert;
}

cw_identity *cw_identity_create(const char *profiles, int client, char fingerprint[128], char *error, size_t error_size) {
    EVP_PKEY *key = EVP_EC_gen("P-256");
    if (!key) { openssl_error(error, error_size, "cannot generate an ECDSA P-256 key"); return NULL; }
    X509 *cert = unsigned_certificate(key, "camcap", 30);
    int ok = cert && X509_sign(cert, key, EVP_sha256());
    if (!ok) { openssl_error(error, error_size, "cannot create the self-signed certificate"); X509_free(cert); EVP_PKEY_free(key); return NULL; }
    SSL_CTX *ctx = SSL_CTX_new(client == 2 ? DTLS_method() : client ? DTLS_client_method() : DTLS_server_method());
    ok = ctx && SSL_CTX_set_min_proto_version(ctx, DTLS1_2_VERSION) && SSL_CTX_use_certificate(ctx, cert)
        && SSL_CTX_use_PrivateKey(ctx, key) && SSL_CTX_check_private_key(ctx)
        && SSL_CTX_set_tlsext_use_srtp(ctx, profiles ? profiles : "SRTP_AEAD_AES_128_GCM:SRTP_AES128_CM_SHA1_80") == 0;   // 0 is success here
    if (!ok) {
        openssl_error(error, error_size, "cannot set up the DTLS context");
        SSL_CTX_free(ctx); X509_free(cert); EVP_PKEY_free(key);
        return NULL;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, verify_fingerprint);
    SSL_CTX_set_read_ahead(ctx, 1);
    fingerprint_of(cert, fingerprint);
    X509_free(cert);
    EVP_PKEY_free(key);
    cw_identity *identity = calloc(1, sizeof *identity);
    if (!identity) { SSL_CTX_free(ctx); snprintf(error, error_size, "out of memory"); return NULL; }
    identity->ctx = ctx;
    identity->client = client == 1;
    return identity;
}

void cw_identity_free(cw_identity *identity) {
    if (!identity) return;
    SSL_CTX_free(identity->ctx);
    free(identity);
}

// The write side: a BIO that keeps each write as one datagram.
static int dgram_write(BIO *bio, const char *data, int length) {
    cw_dtls *d = BIO_get_data(bio);
    if (!d || length < 0) return -1;
    if (d->count == CW_QUEUE || length > CW_DATAGRAM) return length;   // dropped, as a full socket would (DTLS retransmits)
    int slot = (d->head + d->count) % CW_QUEUE;
    memcpy(d->queue[slot], data, (size_t)length);
    d->lengths[slot] = length;
    d->count++;
    return length;
}

static long dgram_ctrl(BIO *bio, int cmd, long num, void *ptr) {
    (void)num; (void)ptr;
    cw_dtls *d = BIO_get_data(bio);
    switch (cmd) {
    case BIO_CTRL_FLUSH: return 1;
    case BIO_CTRL_DGRAM_QUERY_MTU: return d ? d->mtu : 1200;
    case BIO_CTRL_DGRAM_GET_MTU_OVERHEAD: return 28;
    default: return 0;
    }
}

static int dgram_create(BIO *bio) { BIO_set_init(bio, 1); return 1; }
static int dgram_destroy(BIO *bio) { BIO_set_data(bio, NULL); return 1; }

static BIO_METHOD *dgram_method;
static pthread_once_t dgram_once = PTHREAD_ONCE_INIT;
static void dgram_init(void) {
    dgram_method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "camcap datagrams");
    BIO_meth_set_write(dgram_method, dgram_write);
    BIO_meth_set_ctrl(dgram_method, dgram_ctrl);
    BIO_meth_set_create(dgram_method, dgram_create);
    BIO_meth_set_destroy(dgram_method, dgram_destroy);
}

cw_dtls *cw_dtls_create(cw_identity *identity, const char *peer_fingerprint, int mtu, int role) {
    pthread_once(&dgram_once, dgram_init);
    pthread_once(&index_once, index_init);
    if (!identity || !dgram_method || dtls_index < 0) return NULL;
    cw_dtls *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->mtu = mtu > 200 && mtu < CW_DATAGRAM ? mtu : 1200;
    snprintf(d->expected, sizeof d->expected, "%s", peer_fingerprint ? peer_fingerprint : "");
    d->ssl = SSL_new(identity->ctx);
    d->rbio = BIO_new(BIO_s_mem());
    BIO *wbio = BIO_new(dgram_method);
    if (!d->ssl || !d->rbio || !wbio) { SSL_free(d->ssl); BIO_free(d->rbio); BIO_free(wbio); free(d); return NULL; }
    BIO_set_mem_eof_return(d->rbio, -1);
    BIO_set_data(wbio, d);
    SSL_set_bio(d->ssl, d->rbio, wbio);
    SSL_set_ex_data(d->ssl, dtls_index, d);
    d->client = role < 0 ? identity->client : role == 1;
    if (d->client) SSL_set_connect_state(d->ssl); else SSL_set_accept_state(d->ssl);
    SSL_set_options(d->ssl, SSL_OP_NO_QUERY_MTU);
    SSL_set_mtu(d->ssl, d->mtu - 28);
    DTLS_set_link_mtu(d->ssl, d->mtu);
    return d;
}

void cw_dtls_free(cw_dtls *d) {
    if (!d) return;
    SSL_free(d->ssl);   // frees both BIOs
    free(d);
}

const char *cw_dtls_error(cw_dtls *d) { return d ? d->error : "no DTLS association"; }

static int fail(cw_dtls *d, int ret, const char *what) {
    int e = SSL_get_error(d->ssl, ret);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) { ERR_clear_error(); return 0; }
    if (e == SSL_ERROR_ZERO_RETURN) return -2;
    d->failed = 1;
    if (d->mismatch) ERR_clear_error();   // the verify callback wrote the reason
    else openssl_error(d->error, sizeof d->error, what);
    return -1;
}

static int advance(cw_dtls *d) {
    if (d->failed) return -1;
    if (!SSL_is_init_finished(d->ssl)) {
        int r = SSL_do_handshake(d->ssl);
        if (r != 1) return fail(d, r, "DTLS handshake failed");
    }
    if (!d->verified) {
        X509 *peer = SSL_get1_peer_certificate(d->ssl);
        char got[128] = "";
        if (peer) { fingerprint_of(peer, got); X509_free(peer); }
        if (!peer || strcasecmp(got, d->expected) != 0) {
            d->failed = 1;
            snprintf(d->error, sizeof d->error, "the peer's DTLS certificate (sha-256 %.100s) does not match the fingerprint in its offer (%.100s)",
                     peer ? got : "none", d->expected);
            return -1;
        }
        if (!SSL_get_selected_srtp_profile(d->ssl)) {
            d->failed = 1;
            snprintf(d->error, sizeof d->error, "the peer negotiated no SRTP protection profile (use_srtp)");
            return -1;
        }
        d->verified = 1;
    }
    // Application data is not used on this association; reading processes alerts (close_notify). After the
    // handshake nothing read is fatal (RFC 6347 §4.1.2.7): a record OpenSSL refuses is dropped and counted.
    unsigned char sink[2048];
    for (;;) {
        int r = SSL_read(d->ssl, sink, sizeof sink);
        if (r > 0) continue;
        int e = SSL_get_error(d->ssl, r);
        if (e == SSL_ERROR_ZERO_RETURN) return -2;
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) d->dropped++;
        ERR_clear_error();
        return 1;
    }
}

// The smallest protected record the negotiated cipher can produce (explicit nonce or IV, tag or MAC): OpenSSL
// treats a shorter one as a fatal decode error, so such records are dropped before it sees them.
static size_t min_protected(SSL *ssl) {
    const SSL_CIPHER *c = SSL_get_current_cipher(ssl);
    if (!c) return 0;
    if (SSL_CIPHER_is_aead(c)) return SSL_CIPHER_get_cipher_nid(c) == NID_chacha20_poly1305 ? 16 : 24;
    const EVP_MD *md = EVP_get_digestbynid(SSL_CIPHER_get_digest_nid(c));
    return 16 + (size_t)(md ? EVP_MD_get_size(md) : 20) + 1;
}

int cw_dtls_feed(cw_dtls *d, const uint8_t *data, size_t length) {
    if (!d || length > 65536) return -1;
    // Records (RFC 6347 §4.1: type, version, epoch, sequence, length; 13 bytes, then the fragment). A datagram
    // whose records do not add up is dropped whole; after the handshake, so is each record that is not of the
    // current epoch or too short to be protected, so a forged record can never end a working association.
    int done = SSL_is_init_finished(d->ssl) && d->verified;
    size_t least = done ? min_protected(d->ssl) : 0;
    uint8_t kept[CW_DATAGRAM * 2];
    size_t out = 0, at = 0;
    while (at < length) {
        if (length - at < 13) { d->dropped++; return done ? 1 : advance(d); }
        size_t n = ((size_t)data[at + 11] << 8) | data[at + 12];
        if (n > length - at - 13) { d->dropped++; return done ? 1 : advance(d); }
        int epoch = (data[at + 3] << 8) | data[at + 4];
        int version_ok = data[at + 1] == 0xfe && (data[at + 2] == 0xfd || data[at + 2] == 0xff);
        int keep = !done || (version_ok && epoch == 1 && n >= least && data[at] >= 20 && data[at] <= 23);
        if (keep && out + 13 + n <= sizeof kept) { memcpy(kept + out, data + at, 13 + n); out += 13 + n; }
        else if (!keep) d->dropped++;
        else if (!done) { BIO_write(d->rbio, data, (int)length); return advance(d); }   // a large handshake datagram: as is
        at += 13 + n;
    }
    if (out == 0) return done ? 1 : advance(d);
    BIO_write(d->rbio, kept, (int)out);
    return advance(d);
}

long cw_dtls_dropped(cw_dtls *d) { return d ? d->dropped : 0; }

int cw_dtls_tick(cw_dtls *d) {
    if (!d) return -1;
    if (d->client && !d->failed && !SSL_is_init_finished(d->ssl) && SSL_in_before(d->ssl)) return advance(d);   // ClientHello
    if (!SSL_is_init_finished(d->ssl)) DTLSv1_handle_timeout(d->ssl);
    return d->failed ? -1 : (d->verified ? 1 : 0);
}

int cw_dtls_next_datagram(cw_dtls *d, uint8_t *out, size_t capacity) {
    if (!d || d->count == 0) return 0;
    int n = d->lengths[d->head];
    if ((size_t)n > capacity) n = (int)capacity;
    memcpy(out, d->queue[d->head], (size_t)n);
    d->head = (d->head + 1) % CW_QUEUE;
    d->count--;
    return n;
}

void cw_dtls_close(cw_dtls *d) {
    if (!d || !SSL_is_init_finished(d->ssl)) return;
    SSL_shutdown(d->ssl);
    ERR_clear_error();
}

int cw_dtls_srtp_keys(cw_dtls *d, uint8_t local_key[32], uint8_t remote_key[32], int *key_salt_length) {
    uint8_t *server_key = d && d->client ? remote_key : local_key, *client_key = d && d->client ? local_key : remote_key;
    if (!d || !d->verified) return 0;
    SRTP_PROTECTION_PROFILE *p = SSL_get_selected_srtp_profile(d->ssl);
    if (!p) return 0;
    int key, salt;
    if (p->id == SRTP_AES128_CM_SHA1_80) { key = 16; salt = 14; }
    else if (p->id == SRTP_AEAD_AES_128_GCM) { key = 16; salt = 12; }
    else return 0;
    unsigned char m[2 * (16 + 14)];
    if (SSL_export_keying_material(d->ssl, m, (size_t)(2 * (key + salt)), "EXTRACTOR-dtls_srtp", 19, NULL, 0, 0) != 1) return 0;
    // RFC 5764 §4.2: client key, server key, client salt, server salt.
    memcpy(client_key, m, (size_t)key);
    memcpy(server_key, m + key, (size_t)key);
    memcpy(client_key + key, m + 2 * key, (size_t)salt);
    memcpy(server_key + key, m + 2 * key + salt, (size_t)salt);
    OPENSSL_cleanse(m, sizeof m);
    *key_salt_length = key + salt;
    return (int)p->id;
}

static pthread_once_t srtp_once = PTHREAD_ONCE_INIT;
static int srtp_ready;
static void srtp_start(void) { srtp_ready = srtp_init() == srtp_err_status_ok; }

cw_srtp *cw_srtp_create(int profile, const uint8_t *key, int key_length, int outbound) {
    pthread_once(&srtp_once, srtp_start);
    if (!srtp_ready) return NULL;
    srtp_policy_t policy;
    memset(&policy, 0, sizeof policy);
    if (profile == 1 && key_length == 30) {
        srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&policy.rtp);
        srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&policy.rtcp);
    } else if (profile == 7 && key_length == 28) {
        srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtp);
        srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtcp);
    } else {
        return NULL;
    }
    unsigned char k[32];
    memcpy(k, key, (size_t)key_length);
    policy.key = k;
    policy.ssrc.type = outbound ? ssrc_any_outbound : ssrc_any_inbound;
    policy.window_size = 1024;
    policy.allow_repeat_tx = 1;   // NACK retransmissions resend a sequence number
    cw_srtp *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    if (srtp_create(&s->session, &policy) != srtp_err_status_ok) { free(s); s = NULL; }
    memset(k, 0, sizeof k);
    return s;
}

void cw_srtp_free(cw_srtp *s) {
    if (!s) return;
    srtp_dealloc(s->session);
    free(s);
}

int cw_srtp_overhead(void) { return SRTP_MAX_TRAILER_LEN + 4; }

int cw_srtp_protect_rtp(cw_srtp *s, uint8_t *p, int *length, int capacity) {
    if (!s || *length < 12 || *length + cw_srtp_overhead() > capacity) return -1;
    return srtp_protect(s->session, p, length);
}
int cw_srtp_protect_rtcp(cw_srtp *s, uint8_t *p, int *length, int capacity) {
    if (!s || *length < 8 || *length + cw_srtp_overhead() > capacity) return -1;
    return srtp_protect_rtcp(s->session, p, length);
}
int cw_srtp_unprotect_rtp(cw_srtp *s, uint8_t *p, int *length) {
    if (!s || *length < 12) return -1;
    return srtp_unprotect(s->session, p, length);
}
int cw_srtp_unprotect_rtcp(cw_srtp *s, uint8_t *p, int *length) {
    if (!s || *length < 8) return -1;
    return srtp_unprotect_rtcp(s->session, p, length);
}

int cw_hmac_sha1(const uint8_t *key, size_t key_length, const uint8_t *data, size_t length, uint8_t out[20]) {
    unsigned int n = 20;
    return HMAC(EVP_sha1(), key, (int)key_length, data, length, out, &n) != NULL && n == 20;
}

int cw_random(uint8_t *out, size_t length) { return RAND_bytes(out, (int)length) == 1; }

static int inet_pton_any(const char *s, unsigned char buf[16]) {
    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

static int b64(const unsigned char *in, int n, char *out, size_t cap) {
    if ((size_t)(4 * ((n + 2) / 3) + 1) > cap) return 0;
    return EVP_EncodeBlock((unsigned char *)out, in, n) > 0;
}

int cw_tls_self_signed(const char *const *names, int count, int days, char *cert_pem, size_t cert_cap, char *key_pem, size_t key_cap,
                       char spki_sha256_b64[64], char fingerprint[128], char *error, size_t error_size) {
    EVP_PKEY *key = EVP_EC_gen("P-256");
    if (!key) { openssl_error(error, error_size, "cannot generate an ECDSA P-256 key"); return 0; }
    X509 *cert = unsigned_certificate(key, "camcap serve", days);
    int ok = cert != NULL;
    // subjectAltName: every name the server answers to (IP addresses as IP, the rest as DNS).
    char san[2048] = "";
    size_t used = 0;
    for (int i = 0; ok && i < count && names[i]; i++) {
        unsigned char buf[16];
        int ip = inet_pton_any(names[i], buf);
        int w = snprintf(san + used, sizeof san - used, "%s%s:%s", used ? "," : "", ip ? "IP" : "DNS", names[i]);
        if (w < 0 || (size_t)w >= sizeof san - used) { ok = 0; break; }
        used += (size_t)w;
    }
    if (ok && used > 0) {
        X509V3_CTX v3;
        X509V3_set_ctx_nodb(&v3);
        X509V3_set_ctx(&v3, cert, cert, NULL, NULL, 0);
        X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, san);
        ok = ext && X509_add_ext(cert, ext, -1);
        X509_EXTENSION_free(ext);
    }
    ok = ok && X509_sign(cert, key, EVP_sha256());
    if (ok) {
        fingerprint_of(cert, fingerprint);
        unsigned char *der = NULL;
        int n = i2d_PUBKEY(key, &der);
        unsigned char md[32];
        unsigned int mdn = 0;
        ok = n > 0 && EVP_Digest(der, (size_t)n, md, &mdn, EVP_sha256(), NULL) && b64(md, (int)mdn, spki_sha256_b64, 64);
        OPENSSL_free(der);
    }
    if (ok) {
        BIO *c = BIO_new(BIO_s_mem()), *k = BIO_new(BIO_s_mem());
        ok = c && k && PEM_write_bio_X509(c, cert) && PEM_write_bio_PrivateKey(k, key, NULL, NULL, 0, NULL, NULL);
        char *p = NULL;
        long cn = ok ? BIO_get_mem_data(c, &p) : 0;
        if (ok && cn > 0 && (size_t)cn < cert_cap) { memcpy(cert_pem, p, (size_t)cn); cert_pem[cn] = 0; } else ok = 0;
        long kn = ok ? BIO_get_mem_data(k, &p) : 0;
        if (ok && kn > 0 && (size_t)kn < key_cap) { memcpy(key_pem, p, (size_t)kn); key_pem[kn] = 0; OPENSSL_cleanse(p, (size_t)kn); } else ok = 0;
        BIO_free(c); BIO_free(k);
    }
    if (!ok) openssl_error(error, error_size, "cannot create the self-signed TLS certificate");
    X509_free(cert);
    EVP_PKEY_free(key);
    return ok;
}
