/* Red-black-tree lookups: many small nodes allocated one by one (like std::map), then random
 * lookups: pointer chasing over a heap of small objects.
 * usage: rbtree [MiB of nodes (default 64)] [lookups in millions (default 4)] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct node { uint64_t key; struct node *l, *r, *p; int red; };
static struct node *root;
static uint64_t rng = 2463534242ULL;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static void rot(struct node *x, int left)
{
    struct node *y = left ? x->r : x->l;
    if (left) { x->r = y->l; if (y->l) y->l->p = x; } else { x->l = y->r; if (y->r) y->r->p = x; }
    y->p = x->p;
    if (!x->p) root = y; else if (x == x->p->l) x->p->l = y; else x->p->r = y;
    if (left) y->l = x; else y->r = x;
    x->p = y;
}

static void insert(uint64_t k)
{
    struct node *z = calloc(1, sizeof *z), *y = NULL, *x = root;
    if (!z) { perror("rbtree: calloc"); exit(1); }
    z->key = k; z->red = 1;
    while (x) { y = x; x = k < x->key ? x->l : x->r; }
    z->p = y;
    if (!y) root = z; else if (k < y->key) y->l = z; else y->r = z;
    while (z->p && z->p->red) {
        struct node *g = z->p->p;
        int left = z->p == g->l;
        struct node *u = left ? g->r : g->l;
        if (u && u->red) { z->p->red = 0; u->red = 0; g->red = 1; z = g; continue; }
        if (z == (left ? z->p->r : z->p->l)) { z = z->p; rot(z, left); }
        z->p->red = 0; g->red = 1; rot(g, !left);
    }
    root->red = 0;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoull(argv[1], 0, 0) : 64;
    size_t lookups = (argc > 2 ? strtoull(argv[2], 0, 0) : 4) * 1000000;
    size_t n = (mib << 20) / 64; /* a 40-byte node takes a 48- or 64-byte malloc chunk */
    for (size_t i = 0; i < n; i++) insert(next());
    size_t found = 0;
    rng = 2463534242ULL;
    for (size_t i = 0; i < lookups; i++) {
        uint64_t k = (i & 1) ? next() : next() + 1;
        struct node *x = root;
        while (x && x->key != k) x = k < x->key ? x->l : x->r;
        found += x != NULL;
    }
    printf("rbtree: %zu nodes, %zu lookups, %zu found\n", n, lookups, found);
    return 0;
}
