/* test_arena.c — the memory arena of every backend (src/backend/arena.c) on a fake block interface that
 * records what it makes and frees, without a device: alignment, the growth rule (16 MiB, then what is
 * held, capped by the block size and max_block), stack marks across blocks, reserve (one block, or
 * blocks of max_block; kept or remade by the keep rule; refused while in use), failures leaving the
 * arena usable, address lookup, destroy freeing every block; the peak in use (lost block ends included)
 * and the largest tensor since a reserve; the measuring backend (backend.h: be_measure), whose arena
 * counts what a run would take (bytes rounded as on every backend), whose ops run nothing unchecked and
 * whose downloads give zeros. */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "expect.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#endif
#ifdef TEST_ASAN
#include <sanitizer/asan_interface.h>
#endif

#define MIB (1ull << 20)

/* A fake device: blocks at synthetic addresses, a byte budget, counts of live blocks and bytes. */
struct fake {
    uint64_t next, live_bytes, budget, max_block;
    int live, made;
};

static vkasr_status fk_make(struct be_device *d, uint64_t bytes, uint64_t *addr, void **handle, struct err *e) {
    struct fake *f = (struct fake *)d;
    if (f->live_bytes + bytes > f->budget)
        return err_set(e, VKASR_ERR_DEVICE_MEMORY, "fake: %llu bytes over budget", (unsigned long long)bytes);
    *addr = f->next;
    *handle = (void *)(uintptr_t)(f->made + 1);
    f->next += bytes + (1ull << 30); /* gaps: a range never spans two blocks */
    f->live_bytes += bytes;
    f->live++;
    f->made++;
    return VKASR_OK;
}

static void fk_free(struct be_device *d, uint64_t addr, uint64_t bytes, void *handle) {
    (void)addr;
    (void)handle;
    struct fake *f = (struct fake *)d;
    f->live_bytes -= bytes;
    f->live--;
}

static uint64_t fk_max_block(const struct be_device *d) { return ((const struct fake *)d)->max_block; }

static const struct be_block_ops fake_ops = {.make = fk_make, .free = fk_free, .max_block = fk_max_block};

/* Host blocks (the reference backend's): in AddressSanitizer builds, only what is handed out is addressable. */
static vkasr_status host_make(struct be_device *d, uint64_t bytes, uint64_t *addr, void **handle, struct err *e) {
    (void)d, (void)handle;
    void *p = aligned_alloc(BE_SCRATCH_ALIGN, (size_t)bytes);
    if (!p)
        return err_set(e, VKASR_ERR_NO_MEMORY, "host block");
    *addr = (uint64_t)(uintptr_t)p;
    return VKASR_OK;
}
static void host_free(struct be_device *d, uint64_t addr, uint64_t bytes, void *handle) {
    (void)d, (void)bytes, (void)handle;
    free((void *)(uintptr_t)addr);
}
static uint64_t host_max_block(const struct be_device *d) {
    (void)d;
    return UINT64_MAX;
}
static const struct be_block_ops host_ops = {.make = host_make, .free = host_free, .max_block = host_max_block,
                                             .host = true};

static void host_poisoning(void) {
    struct be_arena a;
    struct err e;
    uint64_t p = 0, q = 0;
    be_arena_init(&a, &host_ops, NULL, BE_ARENA_BLOCK);
    EXPECT(be_arena_alloc(&a, 100, &p, &e) == VKASR_OK, "host alloc: %s", e.msg);
    const uint64_t m = be_arena_mark(&a);
    EXPECT(be_arena_alloc(&a, 300, &q, &e) == VKASR_OK && q == p + BE_SCRATCH_ALIGN, "host alloc 2");
    memset((void *)(uintptr_t)p, 1, 100);
    memset((void *)(uintptr_t)q, 2, 300);
#ifdef TEST_ASAN
    char *cp = (char *)(uintptr_t)p, *cq = (char *)(uintptr_t)q;
    EXPECT(!__asan_address_is_poisoned(cp + 99) && __asan_address_is_poisoned(cp + 100),
           "ASan: a tensor's bytes are addressable, the padding after it is not");
    EXPECT(__asan_address_is_poisoned(cq + 300) && __asan_address_is_poisoned(cq + 4096), "ASan: free block poisoned");
    be_arena_release(&a, m);
    EXPECT(__asan_address_is_poisoned(cq) && !__asan_address_is_poisoned(cp), "ASan: released tensor poisoned");
    be_arena_release(&a, 0);
    EXPECT(__asan_address_is_poisoned(cp), "ASan: everything released is poisoned");
#else
    be_arena_release(&a, m);
    printf("host block poisoning: not an AddressSanitizer build, not checked here\n");
#endif
    be_arena_destroy(&a);
}

static void measuring(void) {
    struct be_measure m;
    be_measure_init(&m);
    struct backend *b = &m.be;
    be_tensor s, t, u;
    EXPECT(be_measuring(b) && be_reserve(b, 1ull << 40, UINT64_MAX) == VKASR_OK, "measuring reserve");
    EXPECT(be_alloc_tensor(b, BE_POOL_SCRATCH, BE_F32, 2, (int64_t[]){3, 5}, &s) == VKASR_OK && s.addr &&
               s.addr % BE_SCRATCH_ALIGN == 0, "a measured tensor has an address");
    const uint64_t mark = be_mark(b);
    EXPECT(be_alloc_tensor(b, BE_POOL_SCRATCH, BE_F16, 2, (int64_t[]){1000, 1000}, &t) == VKASR_OK &&
               t.addr == s.addr + 256, "bump");
    be_release(b, mark);
    EXPECT(be_alloc_tensor(b, BE_POOL_SCRATCH, BE_I32, 1, (int64_t[]){1}, &u) == VKASR_OK && u.addr == t.addr,
           "released and taken again");
    /* 60 bytes and 2,000,000 rounded to 256 each: the peak of a stack, not the sum of every tensor */
    EXPECT(be_scratch_peak(b) == 256 + 2000128 && be_scratch_largest(b) == 2000128, "measured peak %llu largest %llu",
           (unsigned long long)be_scratch_peak(b), (unsigned long long)be_scratch_largest(b));
    float zeros[4] = {1, 2, 3, 4};
    EXPECT(be_download(b, zeros, t.addr, sizeof zeros) == VKASR_OK && zeros[0] == 0 && zeros[3] == 0,
           "downloads give zeros");
    /* an op is not run, nor checked: the planner's model has no weights */
    EXPECT(be_linear(b, &(struct op_linear){.x = s}) == VKASR_OK, "an op with no weight on a measuring backend");
    be_release(b, 0);
    EXPECT(be_reserve(b, 1ull << 40, UINT64_MAX) == VKASR_OK && be_scratch_peak(b) == 0 && be_scratch_largest(b) == 0,
           "a reserve starts the counts afresh");
    be_measure_fini(&m);
}

int main(void) {
    measuring();
    struct fake f = {.next = 1ull << 40, .budget = UINT64_MAX, .max_block = UINT64_MAX};
    struct be_arena a;
    struct err e = {0};
    uint64_t p = 0, q = 0, r = 0;
    be_arena_init(&a, &fake_ops, (struct be_device *)&f, BE_ARENA_BLOCK);

    /* growth: a first block of 16 MiB; tensors aligned to 256 bytes */
    EXPECT(be_arena_alloc(&a, 1, &p, &e) == VKASR_OK && a.reserved == 16 * MIB && f.live == 1, "first block");
    EXPECT(be_arena_alloc(&a, 300, &q, &e) == VKASR_OK && q == p + 256 && a.in_use == 256 + 512, "bump: %llx %llx",
           (unsigned long long)p, (unsigned long long)q);
    uint64_t m = be_arena_mark(&a);
    /* the rest of the block is lost to a tensor that does not fit: a second block as large as what is held */
    EXPECT(be_arena_alloc(&a, 16 * MIB, &r, &e) == VKASR_OK && a.n == 2 && a.reserved == 32 * MIB &&
               a.in_use == 32 * MIB, "second block: reserved %llu in use %llu", (unsigned long long)a.reserved,
           (unsigned long long)a.in_use);
    struct be_arena_block b;
    EXPECT(be_arena_find(&a, r + 100, 16 * MIB - 100, &b) && b.addr == r && b.size == 16 * MIB,
           "lookup of the second block");
    EXPECT(!be_arena_find(&a, r + 100, 16 * MIB, &b), "a range past a block's end is not found");
    /* release to the mark: the second block is kept and reused */
    be_arena_release(&a, m);
    EXPECT(a.in_use == 768 && a.cur == 0, "release: in use %llu", (unsigned long long)a.in_use);
    EXPECT(be_arena_alloc(&a, 16 * MIB, &q, &e) == VKASR_OK && q == r && f.made == 2, "the kept block is reused");
    /* growth is capped by max_block; a tensor above it still gets a block of its own size */
    be_arena_release(&a, 0);
    f.max_block = 20 * MIB;
    EXPECT(be_arena_alloc(&a, 17 * MIB, &p, &e) == VKASR_OK && a.n == 3 && a.cur == 1 &&
               a.blocks[1].size == 20 * MIB,
           "growth within max_block: %llu", (unsigned long long)a.blocks[a.cur].size);
    /* the new block went right after the current one: the kept block after it is used next */
    EXPECT(be_arena_alloc(&a, 10 * MIB, &q, &e) == VKASR_OK && a.cur == 2 && q == r, "stack order kept");
    EXPECT(be_arena_alloc(&a, 30 * MIB, &r, &e) == VKASR_OK && a.blocks[a.cur].size == 30 * MIB, "own block");

    /* reserve: refused while in use, then one block; kept when it serves and keep allows, else remade */
    EXPECT(be_arena_reserve(&a, 64 * MIB, UINT64_MAX, &e) == VKASR_ERR_INTERNAL, "reserve while in use");
    be_arena_release(&a, 0);
    f.max_block = UINT64_MAX;
    EXPECT(be_arena_reserve(&a, 64 * MIB + 1, UINT64_MAX, &e) == VKASR_OK && a.n == 1 &&
               a.reserved == 64 * MIB + 256 && f.live == 1 && f.live_bytes == a.reserved,
           "one block of the planned bytes: %zu blocks, %llu bytes", a.n, (unsigned long long)a.reserved);
    const int made = f.made;
    EXPECT(be_arena_reserve(&a, 32 * MIB, UINT64_MAX, &e) == VKASR_OK && f.made == made, "kept");
    EXPECT(be_arena_reserve(&a, 32 * MIB, 32 * MIB, &e) == VKASR_OK && a.reserved == 32 * MIB && f.live == 1,
           "remade: larger than keep");
    /* a device whose blocks are bounded: blocks of max_block and the remainder */
    f.max_block = 10 * MIB + 100;
    EXPECT(be_arena_reserve(&a, 25 * MIB, 0, &e) == VKASR_OK && a.n == 3 && a.blocks[0].size == 10 * MIB &&
               a.blocks[2].size == 5 * MIB && a.reserved == 25 * MIB,
           "split reserve: %zu blocks", a.n);
    /* the stack fills the blocks in order, never growing within the reserve */
    EXPECT(be_arena_alloc(&a, 6 * MIB, &p, &e) == VKASR_OK && be_arena_alloc(&a, 6 * MIB, &q, &e) == VKASR_OK &&
               be_arena_alloc(&a, 5 * MIB, &r, &e) == VKASR_OK && a.n == 3 && a.cur == 2,
           "allocations within a split reserve");
    EXPECT(a.peak == 25 * MIB && a.largest == 6 * MIB, "peak %llu (the blocks' lost ends counted), largest %llu",
           (unsigned long long)a.peak, (unsigned long long)a.largest);
    be_arena_release(&a, 0);

    /* a block the device refuses: an error, the arena unchanged and usable */
    f.max_block = UINT64_MAX;
    f.budget = f.live_bytes + 40 * MIB;
    EXPECT(be_arena_reserve(&a, 100 * MIB, 0, &e) == VKASR_ERR_DEVICE_MEMORY && strstr(e.msg, "over budget"),
           "refused reserve: %s", e.msg);
    EXPECT(be_arena_alloc(&a, 1 * MIB, &p, &e) == VKASR_OK && be_arena_alloc(&a, 50 * MIB, &q, &e) ==
               VKASR_ERR_DEVICE_MEMORY, "refused growth");
    be_arena_release(&a, 0);
    EXPECT(be_arena_alloc(&a, 8 * MIB, &p, &e) == VKASR_OK, "usable after a refusal");
    be_arena_destroy(&a);
    EXPECT(f.live == 0 && f.live_bytes == 0, "destroy frees every block: %d left", f.live);

    host_poisoning();
    printf("%d check(s), %d failure(s)\n", checks, failures);
    return failures ? 1 : 0;
}
