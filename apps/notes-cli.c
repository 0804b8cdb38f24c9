/* SPDX-License-Identifier: MIT */
/* notes-cli.c: `notes --hash-password` and `notes --add-user NAME`, and the knobs they share. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "notes.h"

#define EXIT_USAGE 2
#define EXIT_CONFIG 78

void notes_errf(char *err, size_t err_len, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_len, fmt, ap);
        va_end(ap);
}

/* ---- knobs ---- */

static int parse_long(const char *v, long min, long max, long *ret)
{
        long n = 0;
        if (!*v)
                return -EINVAL;
        for (const char *p = v; *p; p++) {
                if (*p < '0' || *p > '9' || n > (LONG_MAX - (*p - '0')) / 10)
                        return -EINVAL;
                n = n * 10 + (*p - '0');
        }
        if (n < min || n > max)
                return -ERANGE;
        *ret = n;
        return 0;
}

int notes_number_knob(const char *var, long def, long min, long max, const char *unit, long *ret,
                      char *finding, size_t flen, char *fix, size_t xlen)
{
        const char *v = getenv(var);
        *ret = def;
        if (!v || parse_long(v, min, max, ret) == 0)
                return 0;
        notes_errf(finding, flen, "%s='%s' is not a whole number from %ld to %ld", var, v, min,
                   max);
        notes_errf(fix, xlen, "set %s to %s, %ld to %ld, or unset it for %ld", var, unit, min, max,
                   def);
        return -EINVAL;
}

static int state_dir_fix(char *fix, size_t xlen)
{
        notes_errf(fix, xlen,
                   "run under systemd with StateDirectory= or set M0_NOTES_DIR to a writable "
                   "directory");
        return -EINVAL;
}

int notes_state_dir(char *dir, size_t dir_len, char *finding, size_t flen, char *fix, size_t xlen)
{
        const char *v = getenv("M0_NOTES_DIR");
        const char *var = "M0_NOTES_DIR";
        size_t n;
        if (v) {
                n = strlen(v);
        } else {
                v = getenv("STATE_DIRECTORY");
                var = "STATE_DIRECTORY";
                if (!v) {
                        notes_errf(finding, flen,
                                   "no state directory: neither M0_NOTES_DIR nor STATE_DIRECTORY "
                                   "is set");
                        return state_dir_fix(fix, xlen);
                }
                n = strcspn(v, ":");
        }
        if (n == 0) {
                notes_errf(finding, flen, "%s is empty", var);
                return state_dir_fix(fix, xlen);
        }
        if (n >= dir_len) {
                notes_errf(finding, flen, "%s is longer than PATH_MAX", var);
                return state_dir_fix(fix, xlen);
        }
        memcpy(dir, v, n);
        dir[n] = '\0';
        struct stat st;
        if (stat(dir, &st) < 0)
                notes_errf(finding, flen, "%s='%s': %s", var, dir, strerror(errno));
        else if (!S_ISDIR(st.st_mode))
                notes_errf(finding, flen, "%s='%s' is not a directory", var, dir);
        else if (access(dir, W_OK | X_OK) < 0)
                notes_errf(finding, flen, "%s='%s' is not writable: %s", var, dir, strerror(errno));
        else
                return 0;
        return state_dir_fix(fix, xlen);
}

int notes_hash_params(const char *hash, unsigned long long *ret_ops, size_t *ret_mem)
{
        unsigned long m, t;
        int end = 0;
        if (strlen(hash) >= NOTES_HASH_MAX ||
            sscanf(hash, "$argon2id$v=19$m=%lu,t=%lu,p=1$%*[A-Za-z0-9+/]$%*[A-Za-z0-9+/]%n", &m, &t,
                   &end) != 2 ||
            hash[end] != '\0')
                return -EINVAL;
        unsigned long long ops = t;
        size_t mem = (size_t)m * 1024;
        if (ops < crypto_pwhash_OPSLIMIT_MIN || ops > crypto_pwhash_OPSLIMIT_MAX ||
            m > crypto_pwhash_MEMLIMIT_MAX / 1024 || mem < crypto_pwhash_MEMLIMIT_MIN)
                return -EINVAL;
        /* libsodium's own parser agrees that it is a string it could verify against. */
        if (crypto_pwhash_str_needs_rehash(hash, ops, mem) < 0)
                return -EINVAL;
        *ret_ops = ops;
        *ret_mem = mem;
        return 0;
}

bool notes_name_ok(const char *name, size_t len)
{
        if (len == 0 || len > NOTES_NAME_MAX)
                return false;
        for (size_t i = 0; i < len; i++) {
                char c = name[i];
                bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
                if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
                        return false;
        }
        return true;
}

/* ---- the commands ---- */

static int fail(int code, const char *fmt, ...) M0_PRINTF(2, 3);
static int fail(int code, const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        fprintf(stderr, "notes: %s\n", msg);
        return code;
}

/*
 * M0_NOTES_HASH_COST: libsodium's named Argon2id limits. interactive (64 MiB, 2 passes) is what
 * a login can afford on a small machine; moderate (256 MiB, 3) costs about 7 times as much;
 * min (8 KiB, 1) is for tests only, whose hashes must be cheap to make and to verify.
 */
static int hash_cost(unsigned long long *ret_ops, size_t *ret_mem)
{
        static const struct {
                const char *name;
                unsigned long long ops;
                size_t mem;
        } costs[] = {
                {"min", crypto_pwhash_OPSLIMIT_MIN, crypto_pwhash_MEMLIMIT_MIN},
                {"interactive", crypto_pwhash_OPSLIMIT_INTERACTIVE,
                 crypto_pwhash_MEMLIMIT_INTERACTIVE},
                {"moderate", crypto_pwhash_OPSLIMIT_MODERATE, crypto_pwhash_MEMLIMIT_MODERATE},
        };
        const char *v = getenv("M0_NOTES_HASH_COST");
        if (!v)
                v = "interactive";
        for (size_t i = 0; i < sizeof(costs) / sizeof(costs[0]); i++)
                if (strcmp(v, costs[i].name) == 0) {
                        *ret_ops = costs[i].ops;
                        *ret_mem = costs[i].mem;
                        return 0;
                }
        return fail(EXIT_CONFIG,
                    "M0_NOTES_HASH_COST='%s' is not min, interactive or moderate (set "
                    "M0_NOTES_HASH_COST to one of them, or unset it for interactive)",
                    v);
}

/*
 * The password on stdin, up to NOTES_PASSWORD_MAX bytes, one trailing newline (LF or CRLF)
 * dropped. It must not be empty or hold a NUL: /login could never be given it.
 */
static int read_password(char pw[NOTES_PASSWORD_MAX + 2], size_t *ret_len)
{
        size_t n = 0;
        for (;;) {
                ssize_t k = read(STDIN_FILENO, pw + n, NOTES_PASSWORD_MAX + 2 - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return fail(1, "cannot read the password from stdin: %s", strerror(errno));
                if (k == 0)
                        break;
                n += (size_t)k;
                if (n == NOTES_PASSWORD_MAX + 2)
                        break;
        }
        if (n > 0 && pw[n - 1] == '\n')
                n--;
        if (n > 0 && pw[n - 1] == '\r')
                n--;
        if (n > NOTES_PASSWORD_MAX)
                return fail(EXIT_USAGE, "the password on stdin is longer than %d bytes",
                            NOTES_PASSWORD_MAX);
        if (n == 0)
                return fail(EXIT_USAGE, "the password on stdin is empty");
        if (memchr(pw, '\0', n))
                return fail(EXIT_USAGE, "the password on stdin holds a NUL byte");
        *ret_len = n;
        return 0;
}

/* The Argon2id string of the password on stdin, at M0_NOTES_HASH_COST. */
static int hash_stdin(char out[NOTES_HASH_MAX])
{
        unsigned long long ops = 0;
        size_t mem = 0, len = 0;
        char pw[NOTES_PASSWORD_MAX + 2];
        int code = hash_cost(&ops, &mem);
        if (code == 0)
                code = read_password(pw, &len);
        if (code == 0 && crypto_pwhash_str(out, pw, len, ops, mem) != 0)
                code = fail(1, "cannot hash the password: out of memory");
        sodium_memzero(pw, sizeof(pw));
        return code;
}

static int hash_password(int argc)
{
        if (argc != 2)
                return fail(EXIT_USAGE, "usage: notes --hash-password < password");
        char hash[NOTES_HASH_MAX];
        int code = hash_stdin(hash);
        if (code == 0)
                printf("%s\n", hash);
        return code;
}

static int add_user(int argc, char **argv)
{
        if (argc != 3)
                return fail(EXIT_USAGE, "usage: notes --add-user NAME < password");
        const char *name = argv[2];
        if (strcmp(name, NOTES_ADMIN) == 0)
                return fail(EXIT_USAGE, "the user admin's password is M0_NOTES_ADMIN_HASH (make "
                                        "it with notes --hash-password)");
        if (!notes_name_ok(name, strlen(name)))
                return fail(EXIT_USAGE,
                            "'%s' is not a user name: 1 to %d of a-z, 0-9, '.', '_' and '-', the "
                            "first a letter or a digit",
                            name, NOTES_NAME_MAX);
        char dir[PATH_MAX], finding[PATH_MAX + 200], fix[200], err[PATH_MAX + 200];
        long busy;
        if (notes_state_dir(dir, sizeof(dir), finding, sizeof(finding), fix, sizeof(fix)) < 0 ||
            notes_number_knob("M0_NOTES_BUSY_MS", NOTES_BUSY_MS_DEFAULT, 1, 60000, "milliseconds",
                              &busy, finding, sizeof(finding), fix, sizeof(fix)) < 0)
                return fail(EXIT_CONFIG, "%s (%s)", finding, fix);
        char hash[NOTES_HASH_MAX];
        int code = hash_stdin(hash);
        if (code != 0)
                return code;
        notes_db *db = NULL;
        int e = notes_db_open(dir, busy, &db, err, sizeof(err));
        if (e < 0)
                return fail(1, "%s", err);
        e = notes_db_user_add(db, name, hash, (int64_t)time(NULL));
        if (e == -EEXIST)
                code = fail(1, "the user %s exists already", name);
        else if (e < 0)
                code = fail(1, "cannot add the user %s to %s/%s: %s", name, dir, NOTES_DB,
                            notes_db_error(db));
        else
                fprintf(stderr, "notes: added the user %s to %s/%s\n", name, dir, NOTES_DB);
        notes_db_close(db);
        return code;
}

int notes_cli(int argc, char **argv)
{
        if (argc < 2)
                return -1;
        if (strcmp(argv[1], "--hash-password") == 0)
                return hash_password(argc);
        if (strcmp(argv[1], "--add-user") == 0)
                return add_user(argc, argv);
        return -1;
}
