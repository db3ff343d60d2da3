// See include/cwebrtc.h. OpenSSL 3 (DTLS, X.509, EC keys, HMAC, RAND) and libsrtp2 do all the cryptography.
#include "cwebrtc.h"
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <srtp2/srtp.h>
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

static int accept_any(int ok, X509_STORE_CTX *store) {
    (void)ok; (void)store;
    return 1;   // self-signed by design: the certificate is checked against the SDP fingerprint after the handshake
}

cw_identity *cw_identity_create(const char *profiles, int client, char fingerprint[128], char *error, size_t error_size) {
    EVP_PKEY *key = EVP_EC_gen("P-256");
    if (!key) { openssl_error(error, error_size, "cannot generate an ECDSA P-256 key"); return NULL; }
    X509 *cert = X509_new();
    X509_NAME *name = X509_NAME_new();
    unsigned char serial[8];
    RAND_bytes(serial, sizeof serial);
    serial[0] &= 0x7f;
    BIGNUM *bn = BN_bin2bn(serial, sizeof serial, NULL);
    int ok = cert && name && bn && X509_set_version(cert, 2) && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert))
        && X509_gmtime_adj(X509_getm_notBefore(cert), -86400) && X509_gmtime_adj(X509_getm_notAfter(cert), 30L * 86400)
        && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"camcap", -1, -1, 0)
        && X509_set_subject_name(cert, name) && X509_set_issuer_name(cert, name) && X509_set_pubkey(cert, key)
        && X509_sign(cert, key, EVP_sha256());
    BN_free(bn);
    X509_NAME_free(name);
    if (!ok) { openssl_error(error, error_size, "cannot create the self-signed certificate"); X509_free(cert); EVP_PKEY_free(key); return NULL; }
    SSL_CTX *ctx = SSL_CTX_new(client ? DTLS_client_method() : DTLS_server_method());
    ok = ctx && SSL_CTX_set_min_proto_version(ctx, DTLS1_2_VERSION) && SSL_CTX_use_certificate(ctx, cert)
        && SSL_CTX_use_PrivateKey(ctx, key) && SSL_CTX_check_private_key(ctx)
        && SSL_CTX_set_tlsext_use_srtp(ctx, profiles ? profiles : "SRTP_AEAD_AES_128_GCM:SRTP_AES128_CM_SHA1_80") == 0;   // 0 is success here
    if (!ok) {
        openssl_error(error, error_size, "cannot set up the DTLS context");
        SSL_CTX_free(ctx); X509_free(cert); EVP_PKEY_free(key);
        return NULL;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, accept_any);
    SSL_CTX_set_read_ahead(ctx, 1);
    fingerprint_of(cert, fingerprint);
    X509_free(cert);
    EVP_PKEY_free(key);
    cw_identity *identity = calloc(1, sizeof *identity);
    if (!identity) { SSL_CTX_free(ctx); snprintf(error, error_size, "out of memory"); return NULL; }
    identity->ctx = ctx;
    identity->client = client != 0;
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

cw_dtls *cw_dtls_create(cw_identity *identity, const char *peer_fingerprint, int mtu) {
    pthread_once(&dgram_once, dgram_init);
    if (!identity || !dgram_method) return NULL;
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
    d->client = identity->client;
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
    openssl_error(d->error, sizeof d->error, what);
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
    // Application data is not used on this association; reading processes alerts (close_notify).
    unsigned char sink[2048];
    for (;;) {
        int r = SSL_read(d->ssl, sink, sizeof sink);
        if (r > 0) continue;
        int f = fail(d, r, "DTLS read failed");
        return f == 0 ? 1 : f;
    }
}

int cw_dtls_feed(cw_dtls *d, const uint8_t *data, size_t length) {
    if (!d || length > 65536) return -1;
    BIO_write(d->rbio, data, (int)length);
    return advance(d);
}

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
