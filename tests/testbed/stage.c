/*
 * Delay/loss/rate stage for the geosched network testbed.
 *
 * Runs inside the router namespace.  The router's policy routing sends every
 * packet arriving from a host veth into the TUN device this program owns; the
 * program holds the packet for the one-way delay of its (src zone, dst zone)
 * link, serialises it at the link rate, drops it with the link's loss
 * probability and writes it back to the TUN.  Packets written back ingress on
 * the TUN, which matches no "iif" rule, so the router's main table forwards
 * them to the destination veth: no loop.
 *
 * It is written in C because a Python loop could not carry a few hundred
 * Mbit/s of 1500-byte packets on a 2-core machine.
 *
 * Usage: stage TUN_NAME CONFIG_FILE STATS_FILE
 * CONFIG_FILE lines:
 *   seed N
 *   zone IDX                      (declares zone IDX exists, 0 <= IDX < 64)
 *   host A.B.C.D ZONE             (address -> zone; must be in 198.18.0.0/15)
 *   link ZA ZB DELAY_MS LOSS RATE_MBIT QUEUE_MS   (RATE_MBIT 0 = unlimited)
 * Prints "ready" on stdout once the TUN exists.  SIGUSR1 writes counters to
 * STATS_FILE (atomically, via rename); SIGTERM/SIGINT exit.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define MAX_ZONES 64
#define NET_BASE 0xC6120000u /* 198.18.0.0 */
#define NET_MASK 0xFFFE0000u /* /15 */
#define NET_SIZE (1u << 17)
#define NO_ZONE 0xFF
#define READ_BATCH 256
/* Bounds memory if the consumer side stalls; far above any sane BDP here. */
#define MAX_QUEUED_BYTES (512u * 1024u * 1024u)

struct pkt {
    struct pkt *next;
    uint64_t release_ns;
    uint32_t len;
    unsigned char data[];
};

struct link {
    int configured;
    uint64_t delay_ns;
    uint64_t loss_threshold; /* drop if rand64 < threshold */
    double ns_per_byte;      /* 0 = unlimited */
    uint64_t queue_ns;
    uint64_t busy_until;
    struct pkt *head, *tail;
    int active;
    uint64_t rx, tx, lost, qdrop, tx_bytes;
};

static uint8_t zone_of[NET_SIZE];
static struct link links[MAX_ZONES * MAX_ZONES];
static int active_links[MAX_ZONES * MAX_ZONES];
static int n_active;
static uint64_t queued_bytes;
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t c_foreign, c_nolink, c_memdrop, c_write_err;
static volatile sig_atomic_t want_exit, want_stats;
static const char *stats_path;

static uint64_t rand64(void)
{
    /* xorshift64*: fast and good enough for Bernoulli loss. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void on_signal(int sig)
{
    if (sig == SIGUSR1)
        want_stats = 1;
    else
        want_exit = 1;
}

static int parse_config(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        perror("open config");
        return -1;
    }
    char line[512];
    int lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char kw[16];
        if (sscanf(line, "%15s", kw) != 1 || kw[0] == '#')
            continue;
        if (strcmp(kw, "seed") == 0) {
            unsigned long long seed;
            if (sscanf(line, "%*s %llu", &seed) != 1)
                goto bad;
            rng_state = seed ? seed : 1; /* xorshift must not start at 0 */
        } else if (strcmp(kw, "zone") == 0) {
            /* declarative only; links carry the data */
        } else if (strcmp(kw, "host") == 0) {
            char addr[64];
            int zone;
            struct in_addr in;
            if (sscanf(line, "%*s %63s %d", addr, &zone) != 2)
                goto bad;
            if (inet_pton(AF_INET, addr, &in) != 1 || zone < 0 || zone >= MAX_ZONES)
                goto bad;
            uint32_t a = ntohl(in.s_addr);
            if ((a & NET_MASK) != NET_BASE)
                goto bad;
            zone_of[a - NET_BASE] = (uint8_t)zone;
        } else if (strcmp(kw, "link") == 0) {
            int za, zb;
            double delay_ms, loss, rate_mbit, queue_ms;
            if (sscanf(line, "%*s %d %d %lf %lf %lf %lf", &za, &zb, &delay_ms, &loss,
                       &rate_mbit, &queue_ms) != 6)
                goto bad;
            if (za < 0 || za >= MAX_ZONES || zb < 0 || zb >= MAX_ZONES || delay_ms < 0 ||
                loss < 0 || loss > 1 || rate_mbit < 0 || queue_ms < 0)
                goto bad;
            struct link *l = &links[za * MAX_ZONES + zb];
            l->configured = 1;
            l->delay_ns = (uint64_t)(delay_ms * 1e6);
            l->loss_threshold = loss >= 1.0 ? UINT64_MAX : (uint64_t)(loss * 18446744073709551616.0);
            l->ns_per_byte = rate_mbit > 0 ? 8000.0 / rate_mbit : 0.0;
            l->queue_ns = (uint64_t)(queue_ms * 1e6);
        } else {
            goto bad;
        }
    }
    fclose(f);
    return 0;
bad:
    fprintf(stderr, "stage: bad config line %d: %s", lineno, line);
    fclose(f);
    return -1;
}

static void write_stats(void)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", stats_path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    fprintf(f, "global foreign=%llu nolink=%llu memdrop=%llu write_err=%llu queued_bytes=%llu\n",
            (unsigned long long)c_foreign, (unsigned long long)c_nolink,
            (unsigned long long)c_memdrop, (unsigned long long)c_write_err,
            (unsigned long long)queued_bytes);
    for (int i = 0; i < MAX_ZONES * MAX_ZONES; i++) {
        struct link *l = &links[i];
        if (!l->configured || (l->rx == 0 && l->tx == 0))
            continue;
        fprintf(f, "link %d %d rx=%llu tx=%llu lost=%llu qdrop=%llu tx_bytes=%llu\n",
                i / MAX_ZONES, i % MAX_ZONES, (unsigned long long)l->rx,
                (unsigned long long)l->tx, (unsigned long long)l->lost,
                (unsigned long long)l->qdrop, (unsigned long long)l->tx_bytes);
    }
    fclose(f);
    rename(tmp, stats_path);
}

static void enqueue(const unsigned char *buf, uint32_t len, uint64_t now)
{
    if (len < 20 || (buf[0] >> 4) != 4) {
        c_foreign++; /* IPv6 and garbage never leave the router */
        return;
    }
    uint32_t src, dst;
    memcpy(&src, buf + 12, 4);
    memcpy(&dst, buf + 16, 4);
    src = ntohl(src);
    dst = ntohl(dst);
    /* Only benchmark-range traffic may ever be forwarded. */
    if ((src & NET_MASK) != NET_BASE || (dst & NET_MASK) != NET_BASE) {
        c_foreign++;
        return;
    }
    uint8_t zs = zone_of[src - NET_BASE], zd = zone_of[dst - NET_BASE];
    if (zs == NO_ZONE || zd == NO_ZONE) {
        c_nolink++;
        return;
    }
    struct link *l = &links[zs * MAX_ZONES + zd];
    if (!l->configured) {
        c_nolink++;
        return;
    }
    l->rx++;
    uint64_t depart = now;
    if (l->ns_per_byte > 0) {
        uint64_t start = l->busy_until > now ? l->busy_until : now;
        if (start - now > l->queue_ns) {
            l->qdrop++; /* drop-tail, like a full router queue */
            return;
        }
        depart = start + (uint64_t)(l->ns_per_byte * len);
        l->busy_until = depart;
    }
    /* Loss is decided after serialisation: a lost packet still used the link. */
    if (l->loss_threshold && rand64() < l->loss_threshold) {
        l->lost++;
        return;
    }
    if (queued_bytes + len > MAX_QUEUED_BYTES) {
        c_memdrop++;
        return;
    }
    struct pkt *p = malloc(sizeof *p + len);
    if (!p) {
        c_memdrop++;
        return;
    }
    p->next = NULL;
    p->release_ns = depart + l->delay_ns;
    p->len = len;
    memcpy(p->data, buf, len);
    queued_bytes += len;
    /* Release times within one link are monotonic, so a FIFO per link suffices. */
    if (l->tail)
        l->tail->next = p;
    else
        l->head = p;
    l->tail = p;
    if (!l->active) {
        l->active = 1;
        active_links[n_active++] = (int)(l - links);
    }
}

/* Writes all due packets; returns the earliest pending release time or 0. */
static uint64_t flush_due(int fd, uint64_t now)
{
    uint64_t next = 0;
    for (int i = 0; i < n_active;) {
        struct link *l = &links[active_links[i]];
        while (l->head && l->head->release_ns <= now) {
            struct pkt *p = l->head;
            l->head = p->next;
            if (write(fd, p->data, p->len) < 0)
                c_write_err++;
            else {
                l->tx++;
                l->tx_bytes += p->len;
            }
            queued_bytes -= p->len;
            free(p);
        }
        if (!l->head) {
            l->tail = NULL;
            l->active = 0;
            active_links[i] = active_links[--n_active];
            continue;
        }
        if (!next || l->head->release_ns < next)
            next = l->head->release_ns;
        i++;
    }
    return next;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s TUN_NAME CONFIG STATS_FILE\n", argv[0]);
        return 2;
    }
    stats_path = argv[3];
    /* Never outlive the test process that owns the testbed. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() == 1)
        return 1;
    /* Default 50us timer slack would blur sub-millisecond delays. */
    prctl(PR_SET_TIMERSLACK, 1UL);

    memset(zone_of, NO_ZONE, sizeof zone_of);
    if (parse_config(argv[2]) != 0)
        return 2;

    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        perror("open /dev/net/tun");
        return 1;
    }
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    strncpy(ifr.ifr_name, argv[1], IFNAMSIZ - 1);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
        perror("TUNSETIFF");
        return 1;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);

    printf("ready\n");
    fflush(stdout);

    static unsigned char buf[65536];
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    uint64_t next = 0;
    while (!want_exit) {
        if (want_stats) {
            want_stats = 0;
            write_stats();
        }
        struct timespec ts, *tsp = NULL;
        if (next) {
            uint64_t now = now_ns();
            uint64_t wait = next > now ? next - now : 0;
            ts.tv_sec = (time_t)(wait / 1000000000ull);
            ts.tv_nsec = (long)(wait % 1000000000ull);
            tsp = &ts;
        }
        int r = ppoll(&pfd, 1, tsp, NULL);
        if (r < 0 && errno != EINTR) {
            perror("ppoll");
            return 1;
        }
        if (r > 0 && (pfd.revents & (POLLERR | POLLHUP | POLLNVAL))) {
            /* The TUN is gone; spinning on it would burn a core. */
            fprintf(stderr, "stage: tun fd error (revents=%#x)\n", pfd.revents);
            return 1;
        }
        uint64_t now = now_ns();
        if (r > 0 && (pfd.revents & POLLIN)) {
            for (int i = 0; i < READ_BATCH; i++) {
                ssize_t n = read(fd, buf, sizeof buf);
                if (n <= 0)
                    break;
                enqueue(buf, (uint32_t)n, now);
            }
        }
        next = flush_due(fd, now_ns());
    }
    write_stats();
    return 0;
}
