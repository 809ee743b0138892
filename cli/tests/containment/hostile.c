/* A hostile agent for cli/tests/runner_containment.rs: what a contained agent must not
 * be able to do, each attempt printed on stdout (which its case keeps).
 *
 *   hostile uring-connect PATH   a Unix socket made through io_uring (IORING_OP_SOCKET, which
 *                                no socket() filter sees), connected to PATH, "uring" written
 *   hostile add-keys TAG         a key added to the user and the session keyring
 *
 * Built by the test with the system's gcc and <linux/io_uring.h> (linux-libc-dev): no liburing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/io_uring.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

static int uring_socket(void) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    int ring = (int)syscall(SYS_io_uring_setup, 4, &p);
    if (ring < 0) {
        printf("io_uring_setup: %s\n", strerror(errno));
        return -1;
    }
    printf("io_uring_setup: ok\n");
    size_t sq_size = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_size = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    if (cq_size > sq_size) sq_size = cq_size;
    char *sq = mmap(0, sq_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring,
                    IORING_OFF_SQ_RING);
    struct io_uring_sqe *sqes = mmap(0, p.sq_entries * sizeof(struct io_uring_sqe),
                                     PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring,
                                     IORING_OFF_SQES);
    if (sq == MAP_FAILED || sqes == MAP_FAILED) {
        printf("mmap: %s\n", strerror(errno));
        return -1;
    }
    char *cq = sq; /* IORING_FEAT_SINGLE_MMAP: one mapping for both rings */
    unsigned *tail = (unsigned *)(sq + p.sq_off.tail);
    unsigned *mask = (unsigned *)(sq + p.sq_off.ring_mask);
    unsigned *array = (unsigned *)(sq + p.sq_off.array);
    unsigned index = *tail & *mask;
    struct io_uring_sqe *sqe = &sqes[index];
    memset(sqe, 0, sizeof *sqe);
    sqe->opcode = IORING_OP_SOCKET;
    sqe->fd = AF_UNIX;
    sqe->off = SOCK_STREAM;
    sqe->len = 0;
    array[index] = index;
    __atomic_store_n(tail, *tail + 1, __ATOMIC_RELEASE);
    if (syscall(SYS_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0) {
        printf("io_uring_enter: %s\n", strerror(errno));
        return -1;
    }
    unsigned *head = (unsigned *)(cq + p.cq_off.head);
    unsigned *cmask = (unsigned *)(cq + p.cq_off.ring_mask);
    struct io_uring_cqe *cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    struct io_uring_cqe *cqe = &cqes[*head & *cmask];
    int fd = cqe->res;
    __atomic_store_n(head, *head + 1, __ATOMIC_RELEASE);
    if (fd < 0) {
        printf("IORING_OP_SOCKET: %s\n", strerror(-fd));
        return -1;
    }
    printf("IORING_OP_SOCKET: ok\n");
    return fd;
}

static int uring_connect(const char *path) {
    int fd = uring_socket();
    if (fd < 0) return 3;
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    strncpy(addr.sun_path, path, sizeof addr.sun_path - 1);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        printf("connect: %s\n", strerror(errno));
        return 4;
    }
    if (write(fd, "uring", 5) != 5) {
        printf("write: %s\n", strerror(errno));
        return 5;
    }
    printf("connected\n");
    return 0;
}

static int add_keys(const char *tag) {
    const struct { const char *name; long keyring; } keyrings[] = {
        {"user", -4 /* KEY_SPEC_USER_KEYRING */},
        {"session", -3 /* KEY_SPEC_SESSION_KEYRING */},
    };
    int added = 0;
    for (unsigned i = 0; i < 2; i++) {
        char description[128];
        snprintf(description, sizeof description, "%s-%s", tag, keyrings[i].name);
        long serial = syscall(SYS_add_key, "user", description, "secret", 6, keyrings[i].keyring);
        if (serial < 0) {
            printf("add_key %s: %s\n", keyrings[i].name, strerror(errno));
        } else {
            printf("add_key %s: ok %ld\n", keyrings[i].name, serial);
            added++;
        }
    }
    return added ? 6 : 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc == 3 && strcmp(argv[1], "uring-connect") == 0) return uring_connect(argv[2]);
    if (argc == 3 && strcmp(argv[1], "add-keys") == 0) return add_keys(argv[2]);
    fprintf(stderr, "usage: hostile uring-connect PATH | add-keys TAG\n");
    return 2;
}
