// Thin C wrappers over OpenSSL (DTLS 1.2 server with use_srtp, ECDSA certificate, HMAC-SHA1) and libsrtp2.
// No cryptography here: every primitive is OpenSSL's or libsrtp's. Swift (module WebRTC) owns the protocol logic.
#ifndef CWEBRTC_H
#define CWEBRTC_H
#include <stddef.h>
#include <stdint.h>

typedef struct cw_identity cw_identity;   // SSL_CTX with a self-signed ECDSA P-256 certificate
typedef struct cw_dtls cw_dtls;           // one DTLS server association over datagrams handed in and out
typedef struct cw_srtp cw_srtp;           // one libsrtp session (outbound or inbound)

// Creates a DTLS 1.2 server context with a fresh self-signed ECDSA P-256 certificate (valid 30 days) offering
// SRTP_AEAD_AES_128_GCM and SRTP_AES128_CM_SHA1_80. Writes the certificate's SHA-256 fingerprint as
// "AB:CD:…" (95 characters + NUL) to `fingerprint`. NULL on failure, with `error` filled.
// `profiles` is OpenSSL's use_srtp list (NULL: "SRTP_AEAD_AES_128_GCM:SRTP_AES128_CM_SHA1_80").
// `client` 1 makes a DTLS client context instead (tests play the browser with it); 2 a context for either role
// (a WHIP publisher learns its role from the answer, after its offer carried the fingerprint).
cw_identity *cw_identity_create(const char *profiles, int client, char fingerprint[128], char *error, size_t error_size);
void cw_identity_free(cw_identity *identity);

// One association. `peer_fingerprint` (sha-256, "AB:CD:…", from the offer) must match the client's
// certificate, else the handshake fails.
// `role`: -1 the identity's (server, or client for a client identity), 0 server, 1 client (an identity made for
// either role).
cw_dtls *cw_dtls_create(cw_identity *identity, const char *peer_fingerprint, int mtu, int role);
void cw_dtls_free(cw_dtls *dtls);

// Feeds one received datagram and advances the handshake (or reads application data, which is discarded).
// Returns 1 when the handshake has completed (now or before), 0 while in progress, -1 on a fatal error
// (cw_dtls_error describes it), -2 when the peer closed (close_notify).
int cw_dtls_feed(cw_dtls *dtls, const uint8_t *data, size_t length);
// Runs DTLS retransmission timers; call every ~50 ms until connected. Returns as cw_dtls_feed.
int cw_dtls_tick(cw_dtls *dtls);
// Datagrams to send, one at a time: copies the next into `out` and returns its length, 0 when none.
int cw_dtls_next_datagram(cw_dtls *dtls, uint8_t *out, size_t capacity);
const char *cw_dtls_error(cw_dtls *dtls);
// Records dropped since creation: malformed datagrams, and after the handshake records of another epoch, too
// short to be protected, or refused by OpenSSL (RFC 6347 §4.1.2.7: discarded, never fatal).
long cw_dtls_dropped(cw_dtls *dtls);
// Sends close_notify (collect it with cw_dtls_next_datagram).
void cw_dtls_close(cw_dtls *dtls);

// After the handshake: the negotiated SRTP protection profile (1 = AES128_CM_SHA1_80, 7 = AEAD_AES_128_GCM) and
// the exported keying material (RFC 5764 §4.2): our (local) and the peer's (remote) master key||salt.
// Returns the profile, 0 on failure. Key buffers need 32 bytes.
int cw_dtls_srtp_keys(cw_dtls *dtls, uint8_t local_key[32], uint8_t remote_key[32], int *key_salt_length);

// libsrtp: a session protecting (outbound != 0) or unprotecting one direction, for every SSRC.
// `key` is master key||salt for `profile` (1 or 7). NULL on failure.
cw_srtp *cw_srtp_create(int profile, const uint8_t *key, int key_length, int outbound);
void cw_srtp_free(cw_srtp *srtp);
// In place. `length` is in/out; the buffer needs room for cw_srtp_overhead() more bytes. 0 on success,
// else libsrtp's error status.
int cw_srtp_protect_rtp(cw_srtp *srtp, uint8_t *packet, int *length, int capacity);
int cw_srtp_protect_rtcp(cw_srtp *srtp, uint8_t *packet, int *length, int capacity);
int cw_srtp_unprotect_rtp(cw_srtp *srtp, uint8_t *packet, int *length);
int cw_srtp_unprotect_rtcp(cw_srtp *srtp, uint8_t *packet, int *length);
int cw_srtp_overhead(void);

// A self-signed ECDSA P-256 TLS certificate valid `days` days for `names` (subjectAltName: IP addresses and DNS
// names), as PEM (certificate and PKCS#8 key, NUL-terminated), with its SHA-256 fingerprint ("AB:CD:…") and the
// base64 SHA-256 of its SubjectPublicKeyInfo (what Chromium's --ignore-certificate-errors-spki-list takes).
// 1 on success; 0 with `error` filled.
int cw_tls_self_signed(const char *const *names, int count, int days, char *cert_pem, size_t cert_cap, char *key_pem, size_t key_cap,
                       char spki_sha256_b64[64], char fingerprint[128], char *error, size_t error_size);

// HMAC-SHA1 (OpenSSL) for STUN MESSAGE-INTEGRITY. Writes 20 bytes.
int cw_hmac_sha1(const uint8_t *key, size_t key_length, const uint8_t *data, size_t length, uint8_t out[20]);
// Cryptographically random bytes (OpenSSL RAND_bytes). 1 on success.
int cw_random(uint8_t *out, size_t length);
#endif
