/*
 * xs_hello: the extended sockets interface (openrdma/xsocket.h) in one small C program. The server accepts a TCP
 * connection, registers a buffer the client may write and read, and advertises it; the client writes a greeting
 * into it with an RDMA Write, reads it back with an RDMA Read, sends a second greeting from registered memory
 * without a copy, and says "done" with an ordinary write(). Both learn of their completions through a descriptor
 * they poll. A connection that is not in RDMA mode (the peer does not run the layer) is said so, and the program
 * exits 2.
 *
 *   xs_hello -s PORT          the server (listens on 127.0.0.1)
 *   xs_hello -c HOST PORT     the client
 *
 * Build: cc xs_hello.c -lopenrdma_sockets (linking the library makes the program's sockets the layer's, as
 * openrdma-run does for programs that do not know of it). Run it with krdmad and an RNIC on the address.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openrdma/xsocket.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The greeting the client sends from registered memory, with its terminating zero. */
static const char kSent[] = "hello without a copy, server";

static int die(const char *what) {
    perror(what);
    return 1;
}

/* Waits (up to 10 s) for one completion of fd's extended operations and checks it. */
static int complete(int fd, uint64_t context) {
    struct pollfd p = {xs_completion_fd(fd), POLLIN, 0};
    xs_completion_t c;
    for (int tries = 0; tries < 100; ++tries) {
        int n = xs_poll(fd, &c, 1);
        if (n < 0) return die("xs_poll");
        if (n == 1) {
            if (c.context != context || c.status != 0) {
                fprintf(stderr, "completion %llu: status %d\n", (unsigned long long)c.context, c.status);
                return 1;
            }
            return 0;
        }
        poll(&p, 1, 100);
    }
    fprintf(stderr, "no completion for operation %llu\n", (unsigned long long)context);
    return 1;
}

static int rdma_mode(int fd) {
    const char *why = "";
    if (xs_rdma_mode(fd, &why) == 1) return 1;
    printf("the connection is not in RDMA mode (%s): plain TCP\n", why);
    return 0;
}

static int server(int port) {
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 1) != 0) return die("listen");
    printf("listening on port %d\n", port);
    fflush(stdout);
    int fd = accept(l, NULL, NULL);
    if (fd < 0) return die("accept");
    static char buf[4096];
    if (!rdma_mode(fd)) return 2;
    xs_region_t r;
    int64_t h = xs_register(fd, buf, sizeof buf, XS_REMOTE_WRITE | XS_REMOTE_READ, &r);
    if (h < 0) return die("xs_register");
    r.tag = 7;
    if (xs_advertise(fd, &r) != 0) return die("xs_advertise");
    char got[64] = {0}, more[64] = {0};
    /* The zero-copy send arrives in the byte stream, then "done". */
    if (read(fd, more, sizeof kSent) != (ssize_t)sizeof kSent) return die("read (the client's send)");
    if (read(fd, got, 4) != 4 || memcmp(got, "done", 4) != 0) return die("read (done)");
    printf("the client wrote \"%s\" and sent \"%s\"\n", buf, more);
    xs_deregister(fd, h);
    close(fd);
    close(l);
    return strcmp(buf, "hello through an RDMA Write") == 0 && strcmp(more, kSent) == 0 ? 0 : 1;
}

static int client(const char *host, int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) return die("connect");
    if (!rdma_mode(fd)) return 2;
    static char mine[4096];
    int64_t h = xs_register(fd, mine, sizeof mine, XS_LOCAL, NULL);
    if (h < 0) return die("xs_register");
    xs_region_t theirs;
    if (xs_peer_region(fd, &theirs, 0) != 0) return die("xs_peer_region");
    printf("the server advertised %llu bytes (tag %llu)\n", (unsigned long long)theirs.length,
           (unsigned long long)theirs.tag);
    const char *greeting = "hello through an RDMA Write";
    strcpy(mine, greeting);
    if (xs_write(fd, h, 0, strlen(greeting) + 1, &theirs, 0, 1) != 0 || complete(fd, 1) != 0) return die("xs_write");
    if (xs_read(fd, h, 1024, strlen(greeting) + 1, &theirs, 0, 2) != 0 || complete(fd, 2) != 0) return die("xs_read");
    printf("read back \"%s\"\n", mine + 1024);
    memcpy(mine + 2048, kSent, sizeof kSent);
    if (xs_send(fd, h, 2048, sizeof kSent, 3) != 0 || complete(fd, 3) != 0) return die("xs_send");
    if (write(fd, "done", 4) != 4) return die("write");
    xs_deregister(fd, h);
    close(fd);
    return strcmp(mine + 1024, greeting) == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "-s") == 0) return server(atoi(argv[2]));
    if (argc == 4 && strcmp(argv[1], "-c") == 0) return client(argv[2], atoi(argv[3]));
    fprintf(stderr, "usage: xs_hello -s PORT | xs_hello -c HOST PORT\n");
    return 2;
}
