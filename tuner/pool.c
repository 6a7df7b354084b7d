/* Supervisor and worker processes (protocol in pool.h). */
#include "tuner/pool.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { F_HELLO = 1, F_INIT_FAILED, F_JOB, F_PROGRESS, F_REPLY, F_REPLY_LAST };
enum { MAX_FRAME = 64 << 20 };

typedef struct frame_hdr {
    uint32_t type, len;
} frame_hdr;

struct tuner_pool {
    tuner_worker_fns fns;
    void *ctx;
    tuner_pool_opts o;
    pid_t pid; /* worker, -1 when none */
    int fd;    /* our end of the socketpair */
    pt_buf hello;
    int starts;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int send_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

static int send_frame(int fd, uint32_t type, const void *p, size_t n)
{
    frame_hdr h = {type, (uint32_t)n};
    return send_all(fd, &h, sizeof h) || (n && send_all(fd, p, n)) ? -1 : 0;
}

/* Reads exactly n bytes. 0 ok, -1 end of file or error, -2 deadline passed
 * (deadline: absolute monotonic seconds; 0: none). */
static int recv_full(int fd, void *buf, size_t n, double deadline)
{
    char *c = buf;
    while (n) {
        if (deadline > 0) {
            double left = deadline - now_s();
            if (left <= 0)
                return -2;
            struct pollfd pf = {fd, POLLIN, 0};
            int pr = poll(&pf, 1, (int)(left * 1000) + 1);
            if (pr < 0 && errno == EINTR)
                continue;
            if (pr < 0)
                return -1;
            if (pr == 0)
                continue; /* re-check the clock */
        }
        ssize_t k = recv(fd, c, n, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

/* A whole frame; the payload is malloc'd (NUL-terminated for text). */
static int recv_frame(int fd, frame_hdr *h, char **payload, double deadline)
{
    *payload = NULL;
    int rc = recv_full(fd, h, sizeof *h, deadline);
    if (rc)
        return rc;
    if (h->len > MAX_FRAME)
        return -1;
    *payload = malloc((size_t)h->len + 1);
    if (!*payload)
        return -1;
    (*payload)[h->len] = '\0';
    rc = recv_full(fd, *payload, h->len, deadline);
    if (rc) {
        free(*payload);
        *payload = NULL;
    }
    return rc;
}

/* ---- worker side ---- */

static void progress_cb(void *pctx, const char *phase)
{
    send_frame(*(int *)pctx, F_PROGRESS, phase, strlen(phase) + 1);
}

typedef struct init_failure {
    int code;
    char msg[1024];
} init_failure;

static _Noreturn void worker_main(tuner_pool *p, int fd, pid_t parent)
{
    /* die with the supervisor; if it is already gone, don't start */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
    void *state = NULL;
    pt_buf hello;
    pt_buf_init(&hello);
    pt_err e = {0};
    int rc = p->fns.init(p->ctx, &state, &hello, &e);
    if (rc) {
        init_failure f = {rc, ""};
        snprintf(f.msg, sizeof f.msg, "%s", e.msg);
        send_frame(fd, F_INIT_FAILED, &f, sizeof f);
        _exit(3);
    }
    send_frame(fd, F_HELLO, hello.s, hello.len);
    pt_buf_free(&hello);
    int sfd = fd;
    for (;;) {
        frame_hdr h;
        char *req;
        if (recv_frame(fd, &h, &req, 0) || h.type != F_JOB) {
            free(req);
            break;
        }
        pt_buf reply;
        pt_buf_init(&reply);
        bool last = false;
        p->fns.job(state, req, h.len, &reply, &last, progress_cb, &sfd);
        free(req);
        int bad = send_frame(fd, last ? F_REPLY_LAST : F_REPLY, reply.s, reply.len);
        pt_buf_free(&reply);
        if (last || bad)
            break;
    }
    if (p->fns.fini)
        p->fns.fini(state);
    _exit(0);
}

/* ---- supervisor side ---- */

int tuner_pool_new(const tuner_worker_fns *fns, void *ctx, const tuner_pool_opts *o,
                   tuner_pool **out, pt_err *e)
{
    tuner_pool *p = calloc(1, sizeof *p);
    if (!p)
        return pt_errf(e, PT_ENOMEM, "out of memory");
    p->fns = *fns;
    p->ctx = ctx;
    if (o)
        p->o = *o;
    if (p->o.deadline_s <= 0)
        p->o.deadline_s = 10;
    if (p->o.start_deadline_s <= 0)
        p->o.start_deadline_s = 120;
    p->pid = -1;
    p->fd = -1;
    pt_buf_init(&p->hello);
    *out = p;
    return PT_OK;
}

/* Waits for the worker to end; SIGKILL after grace_s. Fills the exit
 * status into info (may be NULL). */
static void reap(tuner_pool *p, double grace_s, tuner_job_info *info)
{
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
    if (p->pid <= 0)
        return;
    int st = 0;
    double until = now_s() + grace_s;
    for (;;) {
        pid_t r = waitpid(p->pid, &st, grace_s > 0 ? WNOHANG : 0);
        if (r == p->pid || (r < 0 && errno != EINTR))
            break;
        if (r == 0 && now_s() > until) {
            kill(p->pid, SIGKILL);
            grace_s = 0; /* now wait for good */
            continue;
        }
        if (r == 0) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    if (info) {
        info->worker_exited = true;
        info->signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
        info->exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 0;
    }
    p->pid = -1;
}

int tuner_pool_start(tuner_pool *p, pt_err *e)
{
    if (p->pid > 0)
        return PT_OK;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return pt_errf(e, PT_EIO, "socketpair: %s", strerror(errno));
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        return pt_errf(e, PT_EIO, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        close(sv[0]);
        worker_main(p, sv[1], parent);
    }
    close(sv[1]);
    p->pid = pid;
    p->fd = sv[0];
    p->starts++;
    frame_hdr h;
    char *payload;
    int rc = recv_frame(p->fd, &h, &payload, now_s() + p->o.start_deadline_s);
    if (rc == -2) {
        kill(p->pid, SIGKILL);
        reap(p, 0, NULL);
        return pt_errf(e, PT_EIO, "worker did not start within %.0f s", p->o.start_deadline_s);
    }
    if (rc) {
        tuner_job_info info = {0};
        reap(p, 1, &info);
        return pt_errf(e, PT_EIO, "worker died while starting (%s %d)",
                       info.signal ? "signal" : "exit code", info.signal ? info.signal : info.exit_code);
    }
    if (h.type == F_INIT_FAILED && h.len == sizeof(init_failure)) {
        init_failure f;
        memcpy(&f, payload, sizeof f);
        free(payload);
        reap(p, 1, NULL);
        f.msg[sizeof f.msg - 1] = '\0';
        return pt_errf(e, f.code ? f.code : PT_EIO, "%s", f.msg);
    }
    if (h.type != F_HELLO) {
        free(payload);
        kill(p->pid, SIGKILL);
        reap(p, 0, NULL);
        return pt_errf(e, PT_EINTERNAL, "worker sent frame %u before its hello", h.type);
    }
    p->hello.len = 0;
    pt_buf_putn(&p->hello, payload, h.len);
    free(payload);
    return PT_OK;
}

const void *tuner_pool_hello(const tuner_pool *p, size_t *len)
{
    *len = p->hello.len;
    return p->hello.s;
}

int tuner_pool_starts(const tuner_pool *p) { return p->starts; }

int tuner_pool_run(tuner_pool *p, const void *req, size_t len, pt_buf *reply,
                   tuner_job_info *info, pt_err *e)
{
    memset(info, 0, sizeof *info);
    reply->len = 0;
    for (int attempt = 0;; attempt++) {
        int rc = tuner_pool_start(p, e);
        if (rc)
            return rc;
        if (send_frame(p->fd, F_JOB, req, len) == 0)
            break;
        reap(p, 1, NULL); /* died between jobs: one fresh worker, then give up */
        if (attempt == 1)
            return pt_errf(e, PT_EIO, "cannot send a job to a fresh worker");
    }
    double t0 = now_s();
    snprintf(info->phase, sizeof info->phase, "start");
    for (;;) {
        frame_hdr h;
        char *payload;
        int rc = recv_frame(p->fd, &h, &payload, t0 + p->o.deadline_s);
        if (rc == -2) {
            kill(p->pid, SIGKILL);
            reap(p, 0, info);
            info->status = TUNER_JOB_TIMEOUT;
            info->kill_s = info->phase_s = now_s() - t0;
            return PT_OK;
        }
        if (rc) {
            reap(p, 1, info);
            info->status = TUNER_JOB_DIED;
            info->phase_s = now_s() - t0;
            return PT_OK;
        }
        if (h.type == F_PROGRESS) {
            snprintf(info->phase, sizeof info->phase, "%s", payload);
            free(payload);
            t0 = now_s();
            continue;
        }
        info->phase_s = now_s() - t0;
        pt_buf_putn(reply, payload, h.len);
        free(payload);
        info->status = TUNER_JOB_DONE;
        if (h.type == F_REPLY_LAST)
            reap(p, 5, info);
        else if (h.type != F_REPLY) {
            kill(p->pid, SIGKILL);
            reap(p, 0, info);
            return pt_errf(e, PT_EINTERNAL, "worker sent frame %u as a reply", h.type);
        }
        return PT_OK;
    }
}

void tuner_pool_free(tuner_pool *p)
{
    if (!p)
        return;
    reap(p, 2, NULL); /* closing our end ends the worker's loop */
    pt_buf_free(&p->hello);
    free(p);
}
