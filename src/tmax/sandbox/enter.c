/* tmax-enter: run a command inside the agent's namespaces with only the agent's
 * capabilities, and be the init of those namespaces. One exec where nsenter + setpriv
 * (and mount, and a Python for the loopback) took several: it runs on every agent
 * command and at every sandbox start, and each exec costs milliseconds on a busy machine.
 *
 *   tmax-enter HOLDER CAPS [--user] [--net] -- COMMAND...
 *
 * HOLDER is the host-side PID of the process holding the namespaces (unshare, whose
 * children are born in the agent's PID namespace); CAPS the capability numbers to keep
 * (comma-separated, "-" for none); --user also joins HOLDER's user namespace, --net its
 * network namespace (a phase without network in a sandbox that has one). The command
 * runs in a child (a PID namespace is entered by forking); this process waits for it
 * and exits with its status (128 + signal when it was killed), passing on the signals a
 * timeout sends.
 *
 *   tmax-enter --init CAPS [--proc] [--lo] [--hide DIR]...
 *
 * The init of the agent's PID namespace (PID 1, started by unshare --fork): with
 * --proc it makes the namespace's fresh /proc read-only and hides what podman hides,
 * with --lo it brings up the loopback of a fresh network namespace, with --hide it
 * covers DIR (the control shell's own files) with an empty read-only tmpfs, so that no
 * process of the namespace can see, replace or block on them; then it keeps only
 * CAPS, prints "ready", and reaps orphans until the namespace ends (as PID 1 it gets
 * no signal from inside the namespace but those it handles, and it handles none).
 *
 * Both run under the toolbox's seccomp filter (FILTER, compiled by tmax.sandbox.seccomp),
 * loaded last, after the capabilities are gone; without it nothing runs.
 * Built into the toolbox by tmax.sandbox.toolbox. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define FILTER "/opt/tmax/lib/seccomp.bpf"

static pid_t child = 0;
static struct sock_filter program[4096];
static struct sock_fprog filter = {0, program};

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
    for (int bit = 0; bit < 64; bit++) {
        if ((keep & (1ULL << bit)) || prctl(PR_CAPBSET_READ, bit, 0, 0, 0) != 1) continue;
        if (prctl(PR_CAPBSET_DROP, bit, 0, 0, 0) == 0) continue;
        /* Dropping needs CAP_SETPCAP. A uid other than root holds none after an exec and
         * can gain none by one (no_new_privs, ambient and inheritable sets empty, below):
         * its bounding set no longer matters. */
        if (errno == EPERM && getuid() != 0 && geteuid() != 0) break;
        die("dropping a capability");
    }
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2] = {
        {(unsigned)keep, (unsigned)keep, 0}, {(unsigned)(keep >> 32), (unsigned)(keep >> 32), 0}};
    if (syscall(SYS_capset, &header, data) != 0) die("capset");
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
        die("clearing ambient capabilities");
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die("no_new_privs");
}

static void read_filter(void) {
    int fd = open(FILTER, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) die(FILTER);
    size_t size = 0;
    for (ssize_t got; (got = read(fd, (char *)program + size, sizeof program - size)) != 0;) {
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) die(FILTER);
        size += (size_t)got;
        if (size == sizeof program) break;
    }
    close(fd);
    if (size == 0 || size % sizeof *program || size == sizeof program) {
        errno = EINVAL;
        die(FILTER);
    }
    filter.len = (unsigned short)(size / sizeof *program);
}

static void load_filter(void) {
    /* after keep_only: no_new_privs is set, so no capability is needed */
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &filter, 0, 0) != 0) die("loading " FILTER);
}

static void mask_proc(void) {
    static const char *masked[] = {"/proc/keys", "/proc/timer_list", "/proc/sched_debug",
                                   "/proc/latency_stats"};
    /* read-only as a mount (MS_BIND): procfs keeps its super block writable */
    if (mount(NULL, "/proc", NULL,
              MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
        die("remounting /proc read-only");
    for (size_t i = 0; i < sizeof masked / sizeof *masked; i++)
        if (access(masked[i], F_OK) == 0 && mount("/dev/null", masked[i], NULL, MS_BIND, NULL) != 0)
            die(masked[i]);
}

static void loopback_up(void) {
    struct ifreq ifr = {0};
    strcpy(ifr.ifr_name, "lo");
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) die("reading the loopback's flags");
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(fd, SIOCSIFFLAGS, &ifr) != 0) die("bringing up the loopback");
    close(fd);
}

static void hide(const char *dir) {
    /* Defence in depth: the control shell reaches its files only through descriptors
     * it opened on names nobody can guess. A namespace without the right to mount (a
     * user namespace mapping an ordinary user, as under unprivileged Apptainer) keeps
     * the directory in sight. */
    mount("tmpfs", dir, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=000");
}

static int init(int argc, char **argv) {
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--proc") == 0) mask_proc();
        else if (strcmp(argv[i], "--lo") == 0) loopback_up();
        else if (strcmp(argv[i], "--hide") == 0 && i + 1 < argc) hide(argv[++i]);
        else {
            fprintf(stderr, "tmax-enter --init: unknown option %s\n", argv[i]);
            return 125;
        }
    }
    read_filter();
    keep_only(argv[2]);
    load_filter();
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);  /* woken by SIGCHLD, never interrupted by it */
    if (write(1, "ready\n", 6) != 6) die("writing ready");
    int null = open("/dev/null", O_RDWR);
    if (null < 0) die("/dev/null");
    for (int fd = 0; fd < 3; fd++) dup2(null, fd);
    if (null > 2) close(null);
    for (;;) {
        while (waitpid(-1, NULL, WNOHANG) > 0) {}
        sigwaitinfo(&chld, NULL);
    }
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "--init") == 0) return init(argc, argv);
    int first = 3;
    int user = argc > first && strcmp(argv[first], "--user") == 0;
    first += user;
    int net = argc > first && strcmp(argv[first], "--net") == 0;
    first += net;
    if (argc < first + 2 || strcmp(argv[first], "--") != 0) {
        fprintf(stderr, "usage: tmax-enter HOLDER CAPS [--user] [--net] -- COMMAND...\n"
                        "       tmax-enter --init CAPS [--proc] [--lo] [--hide DIR]...\n");
        return 125;
    }
    if (user) join(argv[1], "user", CLONE_NEWUSER);
    if (net) join(argv[1], "net", CLONE_NEWNET);  /* owned by that user namespace */
    join(argv[1], "pid_for_children", CLONE_NEWPID);
    join(argv[1], "mnt", CLONE_NEWNS);
    if (chdir("/") != 0) die("chdir /");
    read_filter();
    child = fork();
    if (child < 0) die("fork");
    if (child == 0) {
        keep_only(argv[2]);
        load_filter();
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
