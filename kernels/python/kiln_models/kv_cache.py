"""kiln_models.kv_cache: the paged KV cache.

Keys and values of every layer live in fixed-size blocks: k_cache[l] and v_cache[l] are
[num_blocks, block_size, Hkv, D] arrays allocated once. A request owns a list of blocks (its
block table); token i of the request is at slot table[i // block_size] * block_size +
i % block_size. Blocks come from a free list and go back to it when the request ends, so a
later request reuses them. The host side (tables, lengths, the free list) is plain Python; the
kernels see the tables as an int32 [batch, max_blocks] array and the slots as int32 per token.
"""

import numpy as np

__all__ = ["BlockAllocator", "PagedKVCache", "KVCacheFull"]


class KVCacheFull(RuntimeError):
    """Not enough free blocks for a request (the caller may wait for others to finish)."""


class BlockAllocator:
    """A free list of block indices 0..num_blocks-1."""

    def __init__(self, num_blocks):
        if num_blocks <= 0:
            raise ValueError(f"BlockAllocator: num_blocks must be positive, got {num_blocks}")
        self.num_blocks = num_blocks
        self._free = list(range(num_blocks - 1, -1, -1))  # pop() hands out 0 first
        self._used = set()

    @property
    def num_free(self):
        return len(self._free)

    def allocate(self, n):
        """n free blocks; KVCacheFull (and nothing taken) when fewer are free."""
        if n > len(self._free):
            raise KVCacheFull(f"KV cache full: {n} blocks needed, {len(self._free)} of "
                              f"{self.num_blocks} free")
        blocks = [self._free.pop() for _ in range(n)]
        self._used.update(blocks)
        return blocks

    def free(self, blocks):
        for b in blocks:
            if b not in self._used:
                raise ValueError(f"BlockAllocator: block {b} is not allocated (freed twice?)")
            self._used.remove(b)
            self._free.append(b)


class PagedKVCache:
    """The model's KV cache: per-layer block arrays and per-request block tables.

    `arrays` is the model's Arrays allocator; `max_blocks_per_seq` bounds a request's length
    (max_blocks_per_seq * block_size tokens) and is the width of the kernels' block tables."""

    def __init__(self, arrays, num_layers, num_kv_heads, head_dim, dtype, num_blocks,
                 block_size=16, max_blocks_per_seq=None):
        if block_size <= 0 or block_size & (block_size - 1):
            raise ValueError(f"PagedKVCache: block_size must be a power of two, got "
                             f"{block_size}")
        self.block_size = block_size
        self.allocator = BlockAllocator(num_blocks)
        self.max_blocks_per_seq = max_blocks_per_seq or num_blocks
        shape = (num_blocks, block_size, num_kv_heads, head_dim)
        self.k = [arrays.empty(shape, dtype) for _ in range(num_layers)]
        self.v = [arrays.empty(shape, dtype) for _ in range(num_layers)]
        self.tables = {}   # request id -> list of block indices
        self.lengths = {}  # request id -> tokens cached (or reserved and being written)

    @property
    def max_seq_len(self):
        return self.max_blocks_per_seq * self.block_size

    def blocks_for(self, tokens):
        return -(-tokens // self.block_size)

    def can_fit(self, tokens):
        """Whether a new request of `tokens` tokens would get its blocks now."""
        return self.blocks_for(tokens) <= self.allocator.num_free

    def add(self, seq_id):
        if seq_id in self.tables:
            raise ValueError(f"PagedKVCache: request {seq_id!r} is already in the cache")
        self.tables[seq_id], self.lengths[seq_id] = [], 0

    def reserve(self, seq_id, length):
        """Makes the blocks of request `seq_id` cover `length` tokens (allocating what is
        missing); KVCacheFull when the free list is short (the request keeps its blocks)."""
        if seq_id not in self.tables:
            raise ValueError(f"PagedKVCache: unknown request {seq_id!r}")
        need = self.blocks_for(length)
        if need > self.max_blocks_per_seq:
            raise ValueError(f"PagedKVCache: request {seq_id!r} of {length} tokens is longer "
                             f"than the cache's {self.max_seq_len} tokens per request")
        table = self.tables[seq_id]
        if need > len(table):
            table.extend(self.allocator.allocate(need - len(table)))

    def append(self, seq_id, count):
        """Positions and cache slots (int32 arrays) of `count` new tokens of request `seq_id`,
        after its cached ones; reserves blocks for them and advances its length."""
        start = self.lengths[seq_id]
        self.reserve(seq_id, start + count)
        pos = np.arange(start, start + count, dtype=np.int64)
        table = np.asarray(self.tables[seq_id], dtype=np.int64)
        slots = table[pos // self.block_size] * self.block_size + pos % self.block_size
        self.lengths[seq_id] = start + count
        return pos.astype(np.int32), slots.astype(np.int32)

    def table_row(self, seq_id, out):
        """Writes request `seq_id`'s block table into the int32 row `out` (padded with 0)."""
        table = self.tables[seq_id]
        out[:len(table)] = table
        out[len(table):] = 0

    def free(self, seq_id):
        """Returns request `seq_id`'s blocks to the free list."""
        if seq_id not in self.tables:
            raise ValueError(f"PagedKVCache: unknown request {seq_id!r}")
        self.allocator.free(self.tables.pop(seq_id))
        del self.lengths[seq_id]
