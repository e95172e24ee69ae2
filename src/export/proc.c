/* proc — running ollama (create / run / --version) with a timeout,
 * capturing its output. */
#include "export/ollama.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/timeutil.h"

#define OUT_CAP (64u << 10)
#define ERR_TAIL 4096u

int export_which(const char *prog, char *out, size_t cap)
{
    struct stat st;
    if (strchr(prog, '/')) {
        if (stat(prog, &st) == 0 && S_ISREG(st.st_mode) && access(prog, X_OK) == 0) {
            snprintf(out, cap, "%s", prog);
            return 1;
        }
        return 0;
    }
    const char *path = getenv("PATH");
    if (!path) return 0;
    while (*path) {
        const char *c = strchr(path, ':');
        size_t n = c ? (size_t)(c - path) : strlen(path);
        char p[4096];
        if (n && n + strlen(prog) + 2 < sizeof p) {
            snprintf(p, sizeof p, "%.*s/%s", (int)n, path, prog);
            if (stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0) {
                snprintf(out, cap, "%s", p);
                return 1;
            }
        }
        path += n + (c ? 1 : 0);
        if (!c) break;
    }
    return 0;
}

void export_proc_free(export_proc *p)
{
    sb_free(&p->out);
    sb_free(&p->err);
}

/* Keep only the last ERR_TAIL bytes of stderr. */
static void tail_append(strbuf *b, const char *s, size_t n)
{
    sb_append(b, s, n);
    if (b->len > 2 * ERR_TAIL) {
        memmove(b->buf, b->buf + b->len - ERR_TAIL, ERR_TAIL);
        b->len = ERR_TAIL;
        b->buf[b->len] = 0;
    }
}

int export_proc_run(char *const argv[], const char *cwd, int timeout_s, export_proc *p, dlm_err *e)
{
    memset(p, 0, sizeof *p);
    p->exit_code = -1;
    int po[2], pe[2];
    if (pipe(po)) return err_sys(e, "cannot run %s", argv[0]);
    if (pipe(pe)) {
        close(po[0]);
        close(po[1]);
        return err_sys(e, "cannot run %s", argv[0]);
    }
    pid_t pid = fork();
    if (pid < 0) {
        close(po[0]); close(po[1]); close(pe[0]); close(pe[1]);
        return err_sys(e, "cannot run %s", argv[0]);
    }
    if (pid == 0) {
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0) dup2(nul, 0);
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]); close(po[1]); close(pe[0]); close(pe[1]);
        if (cwd && chdir(cwd) != 0) _exit(126);
        setpgid(0, 0);
        execv(argv[0], argv);
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    struct pollfd fds[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
    int open_fds = 2;
    double deadline = time_mono() + timeout_s;
    char buf[4096];
    while (open_fds) {
        double left = deadline - time_mono();
        if (left <= 0) {
            p->timed_out = 1;
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            break;
        }
        int r = poll(fds, 2, (int)(left * 1000) + 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) break;
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t n = read(fds[i].fd, buf, sizeof buf);
            if (n <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_fds--;
                continue;
            }
            if (i == 0) {
                if (p->out.len < OUT_CAP) sb_append(&p->out, buf, (size_t)n);
            } else {
                tail_append(&p->err, buf, (size_t)n);
            }
        }
    }
    for (int i = 0; i < 2; i++)
        if (fds[i].fd >= 0) close(fds[i].fd);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (!p->timed_out && WIFEXITED(st)) p->exit_code = WEXITSTATUS(st);
    return 0;
}
