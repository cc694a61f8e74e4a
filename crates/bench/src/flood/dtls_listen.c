/* The OpenSSL anchor of `fastshake bench flood`: a DTLSv1_listen loop on 127.0.0.1:PORT that
 * answers every ClientHello without a valid cookie with a HelloVerifyRequest (RFC 6347
 * section 4.2.1). The cookie is HMAC-SHA256(secret, client IP and port), cut to 16 bytes like
 * ours. A ClientHello with a valid cookie is counted and the loop starts over on a fresh SSL
 * object (a flood has none). Built at run time: cc -O2 dtls_listen.c -lssl -lcrypto. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define COOKIE_LEN 16

static unsigned char secret[32];

static int address_mac(SSL *ssl, unsigned char *mac) {
    unsigned char input[18];
    size_t len = 0;
    unsigned short port;
    unsigned int mac_len = 0;
    int ok = 0;
    BIO_ADDR *peer = BIO_ADDR_new();
    if (peer != NULL && BIO_dgram_get_peer(SSL_get_rbio(ssl), peer) > 0 &&
        BIO_ADDR_rawaddress(peer, NULL, &len) && len <= 16 && BIO_ADDR_rawaddress(peer, input, &len)) {
        port = BIO_ADDR_rawport(peer);
        memcpy(input + len, &port, sizeof port);
        ok = HMAC(EVP_sha256(), secret, sizeof secret, input, len + sizeof port, mac, &mac_len) != NULL &&
             mac_len >= COOKIE_LEN;
    }
    BIO_ADDR_free(peer);
    return ok;
}

static int generate_cookie(SSL *ssl, unsigned char *cookie, unsigned int *cookie_len) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    if (!address_mac(ssl, mac))
        return 0;
    memcpy(cookie, mac, COOKIE_LEN);
    *cookie_len = COOKIE_LEN;
    return 1;
}

static int verify_cookie(SSL *ssl, const unsigned char *cookie, unsigned int cookie_len) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    return cookie_len == COOKIE_LEN && address_mac(ssl, mac) && CRYPTO_memcmp(mac, cookie, COOKIE_LEN) == 0;
}

static SSL *listening_ssl(SSL_CTX *ctx, int fd) {
    SSL *ssl = SSL_new(ctx);
    BIO *bio = BIO_new_dgram(fd, BIO_NOCLOSE);
    if (ssl == NULL || bio == NULL)
        return NULL;
    SSL_set_bio(ssl, bio, bio);
    return ssl;
}

int main(int argc, char **argv) {
    struct sockaddr_in addr;
    int fd;
    SSL_CTX *ctx;
    SSL *ssl;
    BIO_ADDR *client;
    if (argc != 2) {
        fprintf(stderr, "usage: %s PORT\n", argv[0]);
        return 2;
    }
    if (RAND_bytes(secret, sizeof secret) != 1)
        return 1;
    fd = socket(AF_INET, SOCK_DGRAM, 0);
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)atoi(argv[1]));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        perror("bind");
        return 1;
    }
    ctx = SSL_CTX_new(DTLS_server_method());
    if (ctx == NULL)
        return 1;
    SSL_CTX_set_min_proto_version(ctx, DTLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_COOKIE_EXCHANGE);
    SSL_CTX_set_cookie_generate_cb(ctx, generate_cookie);
    SSL_CTX_set_cookie_verify_cb(ctx, verify_cookie);
    ssl = listening_ssl(ctx, fd);
    client = BIO_ADDR_new();
    if (ssl == NULL || client == NULL)
        return 1;
    printf("listening on 127.0.0.1:%s\n", argv[1]);
    fflush(stdout);
    for (;;) {
        /* Blocking BIO: returns only for a ClientHello with a valid cookie (or an error). */
        int r = DTLSv1_listen(ssl, client);
        if (r > 0 || r < 0) {
            SSL_free(ssl);
            ssl = listening_ssl(ctx, fd);
            if (ssl == NULL)
                return 1;
        }
    }
}
