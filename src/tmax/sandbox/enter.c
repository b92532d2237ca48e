/* tmax-enter: run a command inside the agent's PID and mount namespaces with only the
 * agent's capabilities. One exec where nsenter + setpriv take two: it runs on every
 * agent command, and each exec costs milliseconds on a busy machine.
 *
 *   tmax-enter HOLDER CAPS [--user] -- COMMAND...
 *
 * HOLDER is the host-side PID of the process holding the namespaces (unshare, whose
 * children are born in the agent's PID namespace); CAPS the capability numbers to keep
 * (comma-separated, "-" for none); --user also joins HOLDER's user namespace. The
 * command runs in a child (a PID namespace is entered by forking); this process waits
 * for it and exits with its status (128 + signal when it was killed), passing on the
 * signals a timeout sends. Built into the toolbox by tmax.sandbox.toolbox. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t child = 0;

static void forward(int sig) {
    if (child > 0) kill(child, sig);
}

static void die(const char *what) {
    fprintf(stderr, "tmax-enter: %s: %s\n", what, strerror(errno));
    exit(125);
}

static void join(const char *holder, const char *ns, int type) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%s/ns/%s", holder, ns);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, type) != 0) die(path);
    close(fd);
}

static void keep_only(const char *caps) {
    unsigned long long keep = 0;
    for (const char *p = caps; *p;) {
        char *end;
        long bit = strtol(p, &end, 10);
        if (end != p && bit >= 0 && bit < 64) keep |= 1ULL << bit;
        p = *end ? end + 1 : end;
    }
    for (int bit = 0; bit < 64; bit++)
        if (!(keep & (1ULL << bit)) && prctl(PR_CAPBSET_DROP, bit, 0, 0, 0) != 0 && errno != EINVAL)
            die("dropping a capability");
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2] = {
        {(unsigned)keep, (unsigned)keep, 0}, {(unsigned)(keep >> 32), (unsigned)(keep >> 32), 0}};
    if (syscall(SYS_capset, &header, data) != 0) die("capset");
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
        die("clearing ambient capabilities");
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die("no_new_privs");
}

int main(int argc, char **argv) {
    int first = 3;
    int user = argc > 3 && strcmp(argv[3], "--user") == 0;
    first += user;
    if (argc < first + 2 || strcmp(argv[first], "--") != 0) {
        fprintf(stderr, "usage: tmax-enter HOLDER CAPS [--user] -- COMMAND...\n");
        return 125;
    }
    if (user) join(argv[1], "user", CLONE_NEWUSER);
    join(argv[1], "pid_for_children", CLONE_NEWPID);
    join(argv[1], "mnt", CLONE_NEWNS);
    if (chdir("/") != 0) die("chdir /");
    child = fork();
    if (child < 0) die("fork");
    if (child == 0) {
        keep_only(argv[2]);
        execv(argv[first + 1], argv + first + 1);
        die(argv[first + 1]);
    }
    int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) signal(sigs[i], forward);
    int status;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR) die("waitpid");
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}
