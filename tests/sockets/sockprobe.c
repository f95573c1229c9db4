/*
 * sockprobe: a plain sockets program (linked to nothing of OpenRDMA) that the sockets tests run under openrdma-run,
 * for what the Debian programs do not show on their own.
 *   sockprobe refused PORT         a non-blocking connect to 127.0.0.1:PORT (nobody listens); prints the SO_ERROR name
 *   sockprobe server PORT          accepts one connection and echoes it with epoll (edge-triggered), MSG_PEEK and
 *                                  FIONREAD on the way, until the client's half-close; then closes
 *   sockprobe forking PORT N       a child per connection echoes it (blocking I/O), closes and _exits; N connections
 *   sockprobe execing PORT N       as forking, but each child executes `sockprobe stdio-echo` with the connection as
 *                                  its standard input and output (inetd's way), which echoes them
 *   sockprobe reexec PORT N        listens, then executes `sockprobe serve-listener FD N` keeping the listener (a
 *                                  server that starts its new binary): it accepts N connections and echoes each
 *   sockprobe eclient PORT BYTES   as client, waiting in an epoll instance the socket joined right after connect
 *   sockprobe sendfile PORT FILE   sends FILE with sendfile(2), half-closes, checks the echo against the file
 *   sockprobe reuseport PORT       listens with SO_REUSEPORT (two of them share the port) and echoes connections one
 *                                  after another until killed
 *   sockprobe churn PORT N BYTES   N clients in turn, each with bytes of its own (a stale byte of an earlier
 *                                  connection shows)
 *   sockprobe client PORT BYTES    connects, writes BYTES of a pattern with writev while reading the echo, half-closes,
 *                                  reads to end of file; checks every byte; prints "ok BYTES"
 *   sockprobe reset PORT           accepts one connection, reads 1000 bytes, then closes it with SO_LINGER 0 (a reset)
 *   sockprobe reset-client PORT    connects, writes 1000 bytes, then reads: prints what the read ended with (the
 *                                  errno's name, or "eof"), within 10 s
 * Exit status: 0 when every check held, 1 otherwise (with the reason on standard error).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static int fail(const char *what) {
    fprintf(stderr, "sockprobe: %s: %s\n", what, strerror(errno));
    return 1;
}

static struct sockaddr_in loopback(int port) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

static unsigned g_seed; /* churn: each connection's bytes differ, so that a byte of an earlier one shows */
static unsigned char pattern(size_t i) { return (unsigned char)(((i + g_seed * 7919u) * 131u + (i >> 12)) & 0xff); }

static int refused(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = loopback(port);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) return fail("connect succeeded");
    if (errno != EINPROGRESS && errno != ECONNREFUSED) return fail("connect");
    if (errno == EINPROGRESS) {
        struct pollfd p = {fd, POLLOUT, 0};
        if (poll(&p, 1, 5000) != 1) return fail("poll did not say the connect ended");
    }
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return fail("getsockopt");
    printf("%s\n", err == ECONNREFUSED ? "ECONNREFUSED" : strerror(err));
    return 0;
}

static int server(int port) {
    int l = socket(AF_INET6, SOCK_STREAM, 0), one = 1;  /* dual stack: an IPv4 client arrives v4-mapped */
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in6 a;
    memset(&a, 0, sizeof a);
    a.sin6_family = AF_INET6;
    a.sin6_port = htons((uint16_t)port);
    if (bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 4) != 0) return fail("listen");
    printf("listening\n");
    fflush(stdout);
    int fd = accept4(l, NULL, NULL, SOCK_NONBLOCK);
    if (fd < 0) return fail("accept4");
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.fd = fd};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) return fail("epoll_ctl");
    static char buf[65536];
    int peeked = 0;
    for (;;) {
        struct epoll_event got;
        int n = epoll_wait(ep, &got, 1, 10000);
        if (n != 1) return fail("epoll_wait: nothing in 10 s");
        for (;;) {  /* edge-triggered: drain until EAGAIN */
            if (!peeked) {
                int avail = 0;
                ssize_t p = recv(fd, buf, 16, MSG_PEEK);
                if (p > 0) {
                    if (ioctl(fd, FIONREAD, &avail) != 0 || avail < p) return fail("FIONREAD below what MSG_PEEK saw");
                    peeked = 1;
                }
            }
            ssize_t r = read(fd, buf, sizeof buf);
            if (r == 0) {
                close(fd);
                printf("echoed until end of file\n");
                return 0;
            }
            if (r < 0) {
                if (errno == EAGAIN) break;
                return fail("read");
            }
            for (ssize_t off = 0; off < r;) {
                ssize_t w = write(fd, buf + off, (size_t)(r - off));
                if (w < 0 && errno == EAGAIN) {
                    struct pollfd p = {fd, POLLOUT, 0};
                    poll(&p, 1, 1000);
                    continue;
                }
                if (w < 0) return fail("write");
                off += w;
            }
        }
    }
}

/* An IPv4 listener on 127.0.0.1:@p port (SO_REUSEADDR), or -1 after saying why. */
static int listen_loopback(int port) {
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = loopback(port);
    if (bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 4) != 0) {
        fail("listen");
        return -1;
    }
    return l;
}

/* Echoes @p in to @p out with blocking read and write until end of file: 0, or -1 after a failed read, -2 after a
 * failed write (errno tells). */
static int echo(int in, int out) {
    static char buf[65536];
    for (;;) {
        ssize_t r = read(in, buf, sizeof buf);
        if (r == 0) return 0;
        if (r < 0) return -1;
        for (ssize_t off = 0; off < r;) {
            ssize_t w = write(out, buf + off, (size_t)(r - off));
            if (w <= 0) return -2;
            off += w;
        }
    }
}

/* A forking server of @p connections: a child per connection, which echoes it itself with blocking read and write
 * until the client's half-close, then closes and leaves with _exit (no exit handlers: the close must not lose the
 * echo's tail); or, with @p exec_worker, executes `sockprobe stdio-echo` with the connection as its standard input
 * and output (inetd's way). */
static int fork_per_connection(int port, int connections, int exec_worker) {
    int l = listen_loopback(port);
    if (l < 0) return 1;
    if (!exec_worker) {
        printf("listening\n");
        fflush(stdout);
    }
    for (int i = 0; i < connections; ++i) {
        int fd = accept(l, NULL, NULL);
        if (fd < 0) return fail("accept");
        pid_t child = fork();
        if (child == 0) {
            close(l);
            if (exec_worker) {
                if (dup2(fd, 0) != 0 || dup2(fd, 1) != 1) _exit(fail("dup2"));
                close(fd);
                execl("/proc/self/exe", "sockprobe", "stdio-echo", (char *)NULL);
                _exit(fail("exec"));
            }
            const int rc = echo(fd, fd);  /* a failed read ends the echo as the end of file does */
            close(fd);
            _exit(rc == -2 ? 1 : 0);
        }
        close(fd);
        int status = 0;
        waitpid(child, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "sockprobe: the %s serving connection %d failed\n", exec_worker ? "program" : "child", i);
            return 1;
        }
    }
    printf("served %d connections\n", connections);
    return 0;
}

/* Waits for @p fd with poll, or with the epoll instance @p ep (level-triggered, registered by the caller). */
static int wait_ready(int fd, int ep, short events, struct pollfd *p) {
    p->fd = fd;
    p->events = events;
    p->revents = 0;
    if (ep < 0) return poll(p, 1, 10000);
    struct epoll_event ev = {(events & POLLIN ? EPOLLIN : 0) | (events & POLLOUT ? EPOLLOUT : 0), {.fd = fd}};
    if (epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) != 0) return -1;
    int n = epoll_wait(ep, &ev, 1, 10000);
    if (n == 1) p->revents = (short)((ev.events & EPOLLIN ? POLLIN : 0) | (ev.events & EPOLLOUT ? POLLOUT : 0) |
                                     (ev.events & EPOLLHUP ? POLLHUP : 0) | (ev.events & EPOLLERR ? POLLERR : 0));
    return n;
}

/* With @p use_epoll, the socket waits in an epoll instance it joined right after connect (while its conversion
 * was still under way). */
static int client_with(int port, size_t bytes, int use_epoll) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = loopback(port);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) return fail("connect");
    int ep = -1;
    if (use_epoll) {
        ep = epoll_create1(0);
        struct epoll_event ev = {EPOLLIN, {.fd = fd}};
        if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) return fail("epoll");
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    static unsigned char out[8192], in[65536];
    size_t sent = 0, got = 0;
    int shut = 0;
    while (got < bytes || !shut) {
        struct pollfd p;
        if (wait_ready(fd, ep, (short)(POLLIN | (sent < bytes ? POLLOUT : 0)), &p) <= 0) {
            return fail(use_epoll ? "epoll_wait: nothing in 10 s" : "poll: nothing in 10 s");
        }
        if (sent < bytes && (p.revents & POLLOUT)) {
            size_t n = bytes - sent < sizeof out ? bytes - sent : sizeof out;
            for (size_t i = 0; i < n; ++i) out[i] = pattern(sent + i);
            struct iovec v[2] = {{out, n / 2}, {out + n / 2, n - n / 2}};
            ssize_t w = writev(fd, v, 2);
            if (w < 0 && errno != EAGAIN) return fail("writev");
            if (w > 0) sent += (size_t)w;
        }
        if (sent == bytes && !shut) {
            if (shutdown(fd, SHUT_WR) != 0) return fail("shutdown");
            shut = 1;
        }
        if (p.revents & (POLLIN | POLLHUP)) {
            ssize_t r = read(fd, in, sizeof in);
            if (r < 0 && errno != EAGAIN) return fail("read");
            if (r == 0) break;
            for (ssize_t i = 0; i < r; ++i) {
                if (in[i] != pattern(got + (size_t)i)) {
                    fprintf(stderr, "sockprobe: byte %zu of the echo is wrong\n", got + (size_t)i);
                    return 1;
                }
            }
            if (r > 0) got += (size_t)r;
        }
    }
    // Every byte came back: the end of file follows (the server closes after the echo), in bounded time.
    char tail;
    ssize_t last = -1;
    for (int i = 0; i < 100 && got == bytes; ++i) {
        struct pollfd p = {fd, POLLIN, 0};
        (void)poll(&p, 1, 100);
        last = read(fd, &tail, 1);
        if (last >= 0 || errno != EAGAIN) break;
    }
    if (got != bytes || last != 0) {
        fprintf(stderr, "sockprobe: %zu of %zu bytes came back before the end of file\n", got, bytes);
        return 1;
    }
    if (close(fd) != 0) return fail("close");
    if (ep >= 0) close(ep);
    printf("ok %zu\n", got);
    return 0;
}

static int client(int port, size_t bytes) { return client_with(port, bytes, 0); }

/* Echoes standard input to standard output with blocking I/O until end of file. */
static int stdio_echo(void) {
    switch (echo(0, 1)) {
        case 0: return 0;
        case -1: return fail("read of standard input");
        default: return fail("write of standard output");
    }
}

/* Accepts @p connections on inherited listener @p l and echoes each until its end of file. */
static int serve_listener(int l, int connections) {
    for (int i = 0; i < connections; ++i) {
        int fd = accept(l, NULL, NULL);
        if (fd < 0) return fail("accept on the inherited listener");
        switch (echo(fd, fd)) {
            case 0: break;
            case -1: return fail("read");
            default: return fail("write");
        }
        close(fd);
    }
    printf("served %d connections\n", connections);
    return 0;
}

/* Listens on @p port beside other processes (SO_REUSEPORT) and echoes connection after connection. */
static int reuseport(int port) {
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    struct sockaddr_in a = loopback(port);
    if (bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 16) != 0) return fail("listen");
    printf("listening\n");
    fflush(stdout);
    for (;;) {
        int fd = accept(l, NULL, NULL);
        if (fd < 0) return fail("accept");
        if (echo(fd, fd) != 0) return fail("echo");
        close(fd);
    }
}

static int reexec(int port, const char *connections) {
    int l = listen_loopback(port);
    if (l < 0) return 1;
    char fd[16];
    snprintf(fd, sizeof fd, "%d", l);
    execl("/proc/self/exe", "sockprobe", "serve-listener", fd, connections, (char *)NULL);
    return fail("exec");
}

/* What the reader thread of sendfile_client() checks: the echo of file @p path on @p fd, @p size bytes. */
struct echo_check {
    int fd;
    const char *path;
    size_t size;
    int ok;
};

static void *read_echo(void *arg) {
    struct echo_check *c = arg;
    static unsigned char in[65536], want[65536];
    int check = open(c->path, O_RDONLY);
    size_t got = 0;
    for (;;) {
        ssize_t r = read(c->fd, in, sizeof in);
        if (r < 0) {
            perror("sockprobe: read of the echo");
            return NULL;
        }
        if (r == 0) break;
        if (pread(check, want, (size_t)r, (off_t)got) != r || memcmp(in, want, (size_t)r) != 0) {
            fprintf(stderr, "sockprobe: the echo differs from the file near byte %zu\n", got);
            return NULL;
        }
        got += (size_t)r;
    }
    close(check);
    if (got != c->size) {
        fprintf(stderr, "sockprobe: %zu of %zu bytes came back\n", got, c->size);
        return NULL;
    }
    c->ok = 1;
    return NULL;
}

/* Sends file @p path with sendfile(2) (blocking socket) while a thread reads the echo and checks it against the
 * file (neither direction's buffers can fill up and stall), then half-closes. */
static int sendfile_client(int port, const char *path) {
    int file = open(path, O_RDONLY);
    struct stat st;
    if (file < 0 || fstat(file, &st) != 0) return fail("open the file");
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = loopback(port);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) return fail("connect");
    struct echo_check c = {fd, path, (size_t)st.st_size, 0};
    pthread_t reader;
    if (pthread_create(&reader, NULL, read_echo, &c) != 0) return fail("pthread_create");
    off_t off = 0;
    while (off < st.st_size) {
        ssize_t n = sendfile(fd, file, &off, (size_t)(st.st_size - off));
        if (n <= 0) return fail("sendfile");
    }
    if (shutdown(fd, SHUT_WR) != 0) return fail("shutdown");
    pthread_join(reader, NULL);
    if (!c.ok) return 1;
    close(fd);
    printf("sent %lld bytes with sendfile\n", (long long)off);
    return 0;
}

/* @p connections in turn, each a client() with bytes of its own. */
static int churn(int port, int connections, size_t bytes) {
    for (int i = 0; i < connections; ++i) {
        g_seed = (unsigned)i + 1;
        if (client(port, bytes) != 0) {
            fprintf(stderr, "sockprobe: connection %d of the churn failed\n", i);
            return 1;
        }
    }
    printf("churned %d connections\n", connections);
    return 0;
}

/* The server of a reset: one connection, 1000 bytes read, then closed with SO_LINGER 0. */
static int reset_server(int port) {
    int l = listen_loopback(port);
    if (l < 0) return 1;
    printf("listening\n");
    fflush(stdout);
    int fd = accept(l, NULL, NULL);
    if (fd < 0) return fail("accept");
    char buf[1000];
    for (size_t got = 0; got < sizeof buf;) {
        ssize_t r = read(fd, buf + got, sizeof buf - got);
        if (r <= 0) return fail("read");
        got += (size_t)r;
    }
    struct linger lg = {1, 0};
    if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) != 0) return fail("SO_LINGER");
    close(fd);
    printf("reset sent\n");
    return 0;
}

/* The client of a reset: 1000 bytes written, then a blocking read; prints how it ended. */
static int reset_client(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = loopback(port);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) return fail("connect");
    char buf[1000];
    memset(buf, 'r', sizeof buf);
    for (size_t sent = 0; sent < sizeof buf;) {
        ssize_t w = write(fd, buf + sent, sizeof buf - sent);
        if (w <= 0) return fail("write");
        sent += (size_t)w;
    }
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 10000) != 1) return fail("poll: nothing in 10 s");
    ssize_t r = read(fd, buf, sizeof buf);
    printf("%s\n", r == 0 ? "eof" : r > 0 ? "bytes" : strerrorname_np(errno));
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "refused") == 0) return refused(atoi(argv[2]));
    if (argc == 3 && strcmp(argv[1], "server") == 0) return server(atoi(argv[2]));
    if (argc == 4 && strcmp(argv[1], "forking") == 0) return fork_per_connection(atoi(argv[2]), atoi(argv[3]), 0);
    if (argc == 4 && strcmp(argv[1], "client") == 0) return client(atoi(argv[2]), strtoul(argv[3], NULL, 10));
    if (argc == 4 && strcmp(argv[1], "eclient") == 0) return client_with(atoi(argv[2]), strtoul(argv[3], NULL, 10), 1);
    if (argc == 4 && strcmp(argv[1], "execing") == 0) return fork_per_connection(atoi(argv[2]), atoi(argv[3]), 1);
    if (argc == 2 && strcmp(argv[1], "stdio-echo") == 0) return stdio_echo();
    if (argc == 4 && strcmp(argv[1], "reexec") == 0) return reexec(atoi(argv[2]), argv[3]);
    if (argc == 3 && strcmp(argv[1], "reuseport") == 0) return reuseport(atoi(argv[2]));
    if (argc == 4 && strcmp(argv[1], "serve-listener") == 0) return serve_listener(atoi(argv[2]), atoi(argv[3]));
    if (argc == 4 && strcmp(argv[1], "sendfile") == 0) return sendfile_client(atoi(argv[2]), argv[3]);
    if (argc == 3 && strcmp(argv[1], "reset") == 0) return reset_server(atoi(argv[2]));
    if (argc == 3 && strcmp(argv[1], "reset-client") == 0) return reset_client(atoi(argv[2]));
    if (argc == 5 && strcmp(argv[1], "churn") == 0) return churn(atoi(argv[2]), atoi(argv[3]), strtoul(argv[4], NULL, 10));
    fprintf(stderr, "usage: sockprobe refused PORT | server PORT | forking PORT N | execing PORT N | reexec PORT N | "
                    "client PORT BYTES\n");
    return 2;
}
