/* libFuzzer entry point for the store's JSON import (db_import_json in
 * db/export.c), built by scripts/fuzz.sh. Each input goes into a fresh
 * store: a copy of an empty one made once per process (SQLite's :memory:
 * cannot hold the store's WAL journal). Properties: a rejected table gives an error code and a
 * one-line message; whatever happens the store stays consistent
 * (integrity_check) and never holds a winner with a non-positive time. */
#include "db/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The empty store's bytes and the path each input's copy lives at. */
static struct {
    char dir[64], path[96], side[3][112];
    pt_buf empty;
} fz;

static void fresh_store(void)
{
    if (!fz.dir[0]) {
        snprintf(fz.dir, sizeof fz.dir, "%s/ptxtune-fuzz-json-XXXXXX",
                 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(fz.dir))
            abort();
        snprintf(fz.path, sizeof fz.path, "%s/s.db", fz.dir);
        snprintf(fz.side[0], sizeof fz.side[0], "%s-wal", fz.path);
        snprintf(fz.side[1], sizeof fz.side[1], "%s-shm", fz.path);
        snprintf(fz.side[2], sizeof fz.side[2], "%s-journal", fz.path);
        db_store *s;
        pt_err e = {0};
        if (db_open(fz.path, NULL, &s, &e) != PT_OK) {
            fprintf(stderr, "cannot create a store: %s\n", e.msg);
            abort();
        }
        db_close(s);
        FILE *f = fopen(fz.path, "rb");
        char buf[65536];
        size_t n;
        pt_buf_init(&fz.empty);
        while (f && (n = fread(buf, 1, sizeof buf, f)) > 0)
            pt_buf_putn(&fz.empty, buf, n);
        if (!f || !fz.empty.len)
            abort();
        fclose(f);
    }
    for (int i = 0; i < 3; i++)
        remove(fz.side[i]);
    FILE *f = fopen(fz.path, "wb");
    if (!f || fwrite(fz.empty.s, 1, fz.empty.len, f) != fz.empty.len || fclose(f))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    db_store *s;
    pt_err e = {0};
    fresh_store();
    if (db_open(fz.path, NULL, &s, &e) != PT_OK) {
        fprintf(stderr, "cannot open the store: %s\n", e.msg);
        abort();
    }
    db_merge_stats st;
    pt_err_clear(&e);
    if (db_import_json(s, (const char *)data, size, "f.json", &st, &e) != PT_OK) {
        if (e.code == PT_OK || !e.msg[0] || strchr(e.msg, '\n')) {
            fprintf(stderr, "bad failure: code %d msg '%s'\n", e.code, e.msg);
            abort();
        }
    }
    char msg[256];
    pt_err ie = {0};
    if (db_integrity(s, msg, sizeof msg, &ie) != PT_OK) {
        fprintf(stderr, "store fails integrity_check after import: %s\n", msg);
        abort();
    }
    int64_t bad = 0;
    pt_err qe = {0};
    if (db_query_int(s, "SELECT count(*) FROM winners w JOIN measurements m ON m.id = "
                        "w.measurement_id WHERE NOT (m.t_median > 0)", &bad, &qe) == PT_OK &&
        bad) {
        fprintf(stderr, "%lld winners with a non-positive time\n", (long long)bad);
        abort();
    }
    db_close(s);
    return 0;
}
