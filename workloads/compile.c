/* A compiler-like workload: many small, short-lived objects. It "parses" generated source
 * into token lists and syntax trees (small mallocs), interns identifiers in a hash table,
 * walks the trees, and frees each function's objects, over and over: a fragmented heap with
 * a moderate working set (the gcc/compile workloads of the superpage papers).
 * usage: compile [MiB of live objects per unit (default 32)] [units (default 8)] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tok { struct tok *next; int kind; char text[20]; };
struct ast { struct ast *kid[2]; struct tok *t; int op; };
struct sym { struct sym *next; char name[24]; int uses; };
#define NSYM 65536
static struct sym *table[NSYM];
static uint64_t x = 0xDEADBEEFCAFEULL;
static uint64_t rnd(void) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return x; }

static struct ast *build(struct tok **t, int depth)
{
    struct ast *a = malloc(sizeof *a);
    if (!a) { perror("compile: malloc"); exit(1); }
    a->t = *t;
    if (*t) *t = (*t)->next;
    a->op = (int)(rnd() % 7);
    a->kid[0] = depth > 0 && *t ? build(t, depth - 1) : NULL;
    a->kid[1] = depth > 0 && *t ? build(t, depth - 1) : NULL;
    return a;
}

static long walk(struct ast *a)
{
    if (!a) return 0;
    long v = a->op + walk(a->kid[0]) + walk(a->kid[1]);
    if (a->t) {
        size_t h = 5381;
        for (const char *c = a->t->text; *c; c++) h = h * 33 + (unsigned char)*c;
        struct sym *s = table[h % NSYM];
        while (s && strcmp(s->name, a->t->text)) s = s->next;
        if (!s) {
            s = calloc(1, sizeof *s);
            if (!s) { perror("compile: calloc"); exit(1); }
            memcpy(s->name, a->t->text, sizeof a->t->text);
            s->next = table[h % NSYM];
            table[h % NSYM] = s;
        }
        s->uses++;
    }
    free(a);
    return v;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoull(argv[1], 0, 0) : 32;
    int units = argc > 2 ? atoi(argv[2]) : 8;
    size_t ntok = (mib << 20) / (sizeof(struct tok) + 16 + sizeof(struct ast) + 16);
    long total = 0;
    for (int u = 0; u < units; u++) {
        struct tok *head = NULL;
        for (size_t i = 0; i < ntok; i++) { /* lex */
            struct tok *t = malloc(sizeof *t);
            if (!t) { perror("compile: malloc"); return 1; }
            t->kind = (int)(rnd() % 5);
            snprintf(t->text, sizeof t->text, "id%llu", (unsigned long long)(rnd() % 200000));
            t->next = head;
            head = t;
        }
        struct tok *cur = head;
        while (cur) total += walk(build(&cur, 12)); /* parse and check, function by function */
        while (head) { struct tok *n = head->next; free(head); head = n; }
    }
    printf("compile: %d units of %zu tokens, checksum %ld\n", units, ntok, total);
    return 0;
}
