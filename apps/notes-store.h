/* SPDX-License-Identifier: MIT */
/* notes-store.h: the notes and revoked sessions in memory, and their one file on disk. */
#ifndef NOTES_STORE_H
#define NOTES_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NOTES_TITLE_MAX 200        /* bytes */
#define NOTES_BODY_MAX (64 * 1024) /* bytes */
#define NOTES_NONCE_HEX 32         /* a session nonce: 16 random bytes as hex */
#define NOTES_FILE "notes.jsonl"
#define NOTES_FILE_TMP "notes.jsonl.tmp"

/** One note. Title and body are NUL-terminated and hold no other NUL. */
struct notes_note {
        uint64_t id;
        int64_t created, updated; /* seconds since the epoch */
        char *title;
        size_t title_len;
        char *body;
        size_t body_len;
};

/** A session ended by /logout before its expiry: refused until then. */
struct notes_revoked {
        char nonce[NOTES_NONCE_HEX + 1];
        int64_t expiry;
};

/**
 * Everything notes keeps. Owned by the one handler (max_threads = 1): no locking. Every
 * change goes to disk (written whole, fsync'd, renamed, directory fsync'd) before the
 * function that makes it returns success.
 */
struct notes_store {
        int dirfd;
        uint64_t next_id;          /* ids are never reused, across restarts too */
        uint64_t generation;       /* part of every session's MAC; bumped to end every session */
        struct notes_note **notes; /* by id, ascending */
        size_t n, cap;
        size_t bytes; /* title and body bytes of every note */
        struct notes_revoked *revoked;
        size_t n_revoked, max_revoked;
};

/**
 * Open `dir` and load NOTES_FILE from it (none: an empty store), leaving out revocations that
 * expired before `now`. Refuses a file it cannot read whole: -errno, with the file, the line
 * and what is wrong in `err`.
 */
int notes_store_open(struct notes_store *s, const char *dir, size_t max_revoked, int64_t now,
                     char *err, size_t err_len);
/** Free what the store holds. Accepts a zeroed or half-opened store. */
void notes_store_close(struct notes_store *s);

/** The note `id`, or NULL. */
struct notes_note *notes_store_find(const struct notes_store *s, uint64_t id);

/**
 * Add a note (the strings are copied) and write the store. On success *ret_note is the new
 * note. On failure memory is as it was, unless the new file was already in place when a
 * later step failed (the directory's fsync): then the note is kept, as the file has it, and
 * -errno is still returned because durability was not confirmed.
 */
int notes_store_add(struct notes_store *s, const char *title, size_t title_len, const char *body,
                    size_t body_len, int64_t now, struct notes_note **ret_note);
/** Replace a note's title and body, as notes_store_add() does. */
int notes_store_replace(struct notes_store *s, struct notes_note *note, const char *title,
                        size_t title_len, const char *body, size_t body_len, int64_t now);
/** Delete a note, as notes_store_add() does. */
int notes_store_delete(struct notes_store *s, struct notes_note *note, int64_t now);

/** Whether a session nonce (NOTES_NONCE_HEX hex digits) has been revoked. */
bool notes_store_is_revoked(const struct notes_store *s, const char *nonce);
/**
 * Revoke a session until `expiry` and write the store. When the bounded list is full even
 * after dropping what expired, the generation is bumped instead, which ends every session.
 * The revocation holds in memory even when the write fails (-errno): failing closed.
 * *ret_bumped says whether the generation moved.
 */
int notes_store_revoke(struct notes_store *s, const char *nonce, int64_t expiry, int64_t now,
                       bool *ret_bumped);

#endif /* NOTES_STORE_H */
