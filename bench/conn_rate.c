/*
 * conn_rate: connection setup as an unmodified program does it, for bench_sockets (run with and without the sockets
 * layer): each connection is connect + accept + one byte each way + close.
 *   conn_rate server PORT        accepts and answers forever (until killed)
 *   conn_rate client PORT N      N connections one after the other; prints "rate R" (connections per second) and
 *                                "cpu_us C" (this process's CPU per connection, its threads included)
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: conn_rate server PORT | conn_rate client PORT N\n");
        return 2;
    }
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)atoi(argv[2]));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (strcmp(argv[1], "server") == 0) {
        int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 128) != 0) return perror("listen"), 1;
        for (;;) {
            int c = accept(l, NULL, NULL);
            char b;
            if (c >= 0 && read(c, &b, 1) == 1) (void)!write(c, &b, 1);
            if (c >= 0) close(c);
        }
    }
    const int n = argc > 3 ? atoi(argv[3]) : 1000;
    const double t0 = now();
    for (int i = 0; i < n; ++i) {
        int c = socket(AF_INET, SOCK_STREAM, 0);
        char b = 'x';
        if (connect(c, (struct sockaddr *)&a, sizeof a) != 0) return perror("connect"), 1;
        if (write(c, &b, 1) != 1 || read(c, &b, 1) != 1) return perror("exchange"), 1;
        close(c);
    }
    printf("rate %.0f\n", n / (now() - t0));
    // This process's CPU per connection (all its threads: the sockets layer's too), for where a setup's time goes.
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        const double cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
                           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
        printf("cpu_us %.0f\n", cpu / n);
    }
    return 0;
}
