/* B-tree lookups: build a B-tree of order 32 over random keys, then look up random keys.
 * Pointer-chasing over nodes spread across the heap (Navarro's "Tree"-style search workload).
 * usage: btree [MiB of nodes (default 128)] [lookups in millions (default 4)] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define ORDER 32
struct node {
    int n, leaf;
    uint64_t key[ORDER - 1];
    struct node *child[ORDER];
};

static uint64_t rng = 88172645463325252ULL;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static struct node *new_node(int leaf)
{
    struct node *x = calloc(1, sizeof *x);
    if (!x) { perror("btree: calloc"); exit(1); }
    x->leaf = leaf;
    return x;
}

static void split(struct node *p, int i)
{
    struct node *y = p->child[i], *z = new_node(y->leaf);
    int t = ORDER / 2;
    z->n = t - 1;
    for (int j = 0; j < t - 1; j++) z->key[j] = y->key[j + t];
    if (!y->leaf) for (int j = 0; j < t; j++) z->child[j] = y->child[j + t];
    y->n = t - 1;
    for (int j = p->n; j > i; j--) p->child[j + 1] = p->child[j];
    p->child[i + 1] = z;
    for (int j = p->n - 1; j >= i; j--) p->key[j + 1] = p->key[j];
    p->key[i] = y->key[t - 1];
    p->n++;
}

static struct node *insert(struct node *r, uint64_t k)
{
    if (r->n == ORDER - 1) {
        struct node *s = new_node(0);
        s->child[0] = r;
        split(s, 0);
        r = s;
    }
    struct node *x = r;
    for (;;) {
        int i = x->n - 1;
        if (x->leaf) {
            while (i >= 0 && k < x->key[i]) { x->key[i + 1] = x->key[i]; i--; }
            x->key[i + 1] = k;
            x->n++;
            return r;
        }
        while (i >= 0 && k < x->key[i]) i--;
        i++;
        if (x->child[i]->n == ORDER - 1) {
            split(x, i);
            if (k > x->key[i]) i++;
        }
        x = x->child[i];
    }
}

static int lookup(const struct node *x, uint64_t k)
{
    while (x) {
        int i = 0;
        while (i < x->n && k > x->key[i]) i++;
        if (i < x->n && k == x->key[i]) return 1;
        if (x->leaf) return 0;
        x = x->child[i];
    }
    return 0;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoull(argv[1], 0, 0) : 128;
    size_t lookups = (argc > 2 ? strtoull(argv[2], 0, 0) : 4) * 1000000;
    size_t keys = (mib << 20) / sizeof(struct node) * (ORDER * 3 / 4); /* nodes ~3/4 full */
    struct node *root = new_node(1);
    for (size_t i = 0; i < keys; i++) root = insert(root, next() >> 1);
    size_t found = 0;
    rng = 88172645463325252ULL;
    for (size_t i = 0; i < lookups; i++) found += lookup(root, (i & 1) ? next() >> 1 : next());
    printf("btree: %zu keys, %zu lookups, %zu found\n", keys, lookups, found);
    return 0;
}
