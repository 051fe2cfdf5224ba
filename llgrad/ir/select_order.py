"""Which of several equal elements PyTorch's CPU sort, topk and kthvalue return.

They run unstable algorithms, so among equal values (and among NaNs, which count as equal
to each other) the index they return is fixed only by the algorithm's steps: sort (stable
not asked for) runs libstdc++'s std::sort (SortingKernel.cpp), topk runs libstdc++'s
std::nth_element then std::sort over the first k - 1 (or
std::partial_sort when k * 64 <= n; TopKImpl.h), kthvalue runs its own median-of-three
quickselect (quick_select_template, Sorting.cpp), mode sorts with std::sort and takes the
last of the first longest run (TensorCompareKernel.cpp). The functions here replay those steps on
one slice, comparing ranks (NaN the largest), and give the positions in the order PyTorch
leaves them. sort, topk and kthvalue replay only slices where the answer depends on it (equal
values, or topk's sorted=False); elsewhere a stable NumPy sort gives the same result."""
import numpy as np


def ranks(row):
    """Dense ranks of a 1-d array's values, NaN above everything (all NaNs equal)."""
    nan = row != row
    _, inv = np.unique(np.where(nan, 0, row), return_inverse=True)
    inv = inv.reshape(-1).astype(np.int64)
    return np.where(nan, inv.max(initial=0) + 1, inv).tolist()


class _Seq:
    """keys and positions swapped together; less(i, j) compares keys (libstdc++'s comp)."""

    def __init__(self, keys):
        self.k = keys
        self.p = list(range(len(keys)))

    def swap(self, i, j):
        k, p = self.k, self.p
        k[i], k[j] = k[j], k[i]
        p[i], p[j] = p[j], p[i]

    # ---- libstdc++ (bits/stl_algo.h, bits/stl_heap.h), with comp = key less-than -------

    def move_median_to_first(self, result, a, b, c):
        k = self.k
        if k[a] < k[b]:
            if k[b] < k[c]:
                self.swap(result, b)
            elif k[a] < k[c]:
                self.swap(result, c)
            else:
                self.swap(result, a)
        elif k[a] < k[c]:
            self.swap(result, a)
        elif k[b] < k[c]:
            self.swap(result, c)
        else:
            self.swap(result, b)

    def unguarded_partition(self, first, last, pivot):
        k = self.k
        while True:
            while k[first] < k[pivot]:
                first += 1
            last -= 1
            while k[pivot] < k[last]:
                last -= 1
            if not first < last:
                return first
            self.swap(first, last)
            first += 1

    def partition_pivot(self, first, last):
        mid = first + (last - first) // 2
        self.move_median_to_first(first, first + 1, mid, last - 1)
        return self.unguarded_partition(first + 1, last, first)

    def insertion_sort(self, first, last):
        k, p = self.k, self.p
        for i in range(first + 1, last):
            vk, vp = k[i], p[i]
            if vk < k[first]:
                k[first + 1:i + 1], p[first + 1:i + 1] = k[first:i], p[first:i]
                k[first], p[first] = vk, vp
            else:
                self.linear_insert(i)

    def linear_insert(self, last):
        k, p = self.k, self.p
        vk, vp = k[last], p[last]
        nxt = last - 1
        # (nxt >= 0: with NaNs the values are not ordered, and libstdc++'s unguarded loop
        # would read before the slice)
        while nxt >= 0 and vk < k[nxt]:
            k[last], p[last] = k[nxt], p[nxt]
            last, nxt = nxt, nxt - 1
        k[last], p[last] = vk, vp

    def sort(self, first, last):
        if first == last:
            return
        self.introsort_loop(first, last, 2 * ((last - first).bit_length() - 1))
        if last - first > 16:
            self.insertion_sort(first, first + 16)
            for i in range(first + 16, last):
                self.linear_insert(i)
        else:
            self.insertion_sort(first, last)

    def introsort_loop(self, first, last, depth):
        while last - first > 16:
            if depth == 0:
                self.partial_sort(first, last, last)
                return
            depth -= 1
            cut = self.partition_pivot(first, last)
            self.introsort_loop(cut, last, depth)
            last = cut

    def nth_element(self, first, nth, last):
        if first == last or nth == last:
            return
        depth = 2 * ((last - first).bit_length() - 1)
        while last - first > 3:
            if depth == 0:
                self.heap_select(first, nth + 1, last)
                self.swap(first, nth)
                return
            depth -= 1
            cut = self.partition_pivot(first, last)
            if cut <= nth:
                first = cut
            else:
                last = cut
        self.insertion_sort(first, last)

    def partial_sort(self, first, middle, last):
        self.heap_select(first, middle, last)
        while middle - first > 1:           # (sort_heap)
            middle -= 1
            self.pop_heap(first, middle, middle)

    def heap_select(self, first, middle, last):
        self.make_heap(first, middle)
        k = self.k
        for i in range(middle, last):
            if k[i] < k[first]:
                self.pop_heap(first, middle, i)

    def make_heap(self, first, last):
        n = last - first
        if n < 2:
            return
        parent = (n - 2) // 2
        while True:
            self.adjust_heap(first, parent, n, self.k[first + parent], self.p[first + parent])
            if parent == 0:
                return
            parent -= 1

    def pop_heap(self, first, last, result):
        k, p = self.k, self.p
        vk, vp = k[result], p[result]
        k[result], p[result] = k[first], p[first]
        self.adjust_heap(first, 0, last - first, vk, vp)

    def adjust_heap(self, first, hole, n, vk, vp):
        k, p = self.k, self.p
        top = second = hole
        while second < (n - 1) // 2:
            second = 2 * (second + 1)
            if k[first + second] < k[first + second - 1]:
                second -= 1
            k[first + hole], p[first + hole] = k[first + second], p[first + second]
            hole = second
        if n % 2 == 0 and second == (n - 2) // 2:
            second = 2 * (second + 1)
            k[first + hole], p[first + hole] = k[first + second - 1], p[first + second - 1]
            hole = second - 1
        parent = (hole - 1) // 2              # (push_heap)
        while hole > top and k[first + parent] < vk:
            k[first + hole], p[first + hole] = k[first + parent], p[first + parent]
            hole = parent
            parent = (hole - 1) // 2
        k[first + hole], p[first + hole] = vk, vp


def topk_positions(row, k, largest, sorted_):
    """The positions of PyTorch's topk of a 1-d array, in its order."""
    r = ranks(row)
    s = _Seq([-x for x in r] if largest else r)
    n = len(r)
    if k * 64 <= n:
        s.partial_sort(0, k, n)
    else:
        s.nth_element(0, k - 1, n)
        if sorted_:
            s.sort(0, k - 1)
    return s.p[:k]


def sort_positions(row, descending):
    """The positions of PyTorch's unstable sort (std::sort, NaN the largest) of a 1-d array,
    in its order."""
    r = ranks(row)
    s = _Seq([-x for x in r] if descending else r)
    s.sort(0, len(r))
    return s.p


_RADIX_DTYPES = ("uint8", "int8", "int16", "int32", "int64")


def sort_replayed(shape, dtype, dim, descending, stable):
    """Whether sort's order among equal values is std::sort's (replayed by sort_positions),
    not a stable sort's: stable not asked for, slices over 16 long (std::sort's insertion
    sort of 16 or fewer is stable), and not the radix sort (stable) ATen takes for 1-d
    integer tensors of 32768 (its GRAIN_SIZE) or more sorted ascending."""
    if stable or not shape or shape[dim] <= 16:
        return False
    return not (len(shape) == 1 and str(dtype) in _RADIX_DTYPES and not descending
                and shape[0] >= 32768)


def mode_position(row):
    """The position of PyTorch's mode of a 1-d array: std::sort of (value, position) by
    value (a NaN compares false both ways), then the last element of the first longest run
    of equal values."""
    s = _Seq(row.tolist())
    n = len(s.k)
    s.sort(0, n)
    k = s.k
    best = at = run = 0
    for i in range(n):
        run += 1
        if i == n - 1 or k[i] != k[i + 1]:
            if run > best:
                best, at = run, i
            run = 0
    return s.p[at]


def kthvalue_position(row, k):
    """The position of PyTorch's kthvalue (k from 1) of a 1-d array."""
    s = _Seq([-x for x in ranks(row)])      # (its comparison is "greater, or NaN")
    key = s.k
    lo, hi, k = 0, len(key) - 1, k - 1
    while True:
        if hi <= lo:
            break
        if hi == lo + 1:
            if key[lo] < key[hi]:
                s.swap(lo, hi)
            break
        s.swap((lo + hi) >> 1, lo + 1)
        if key[lo + 1] < key[hi]:
            s.swap(lo + 1, hi)
        if key[lo] < key[hi]:
            s.swap(lo, hi)
        if key[lo + 1] < key[lo]:
            s.swap(lo + 1, lo)
        i, j, piv = lo + 1, hi, key[lo]
        while True:
            i += 1
            while piv < key[i]:
                i += 1
            j -= 1
            while key[j] < piv:
                j -= 1
            if j < i:
                break
            s.swap(i, j)
        s.swap(lo, j)
        if j <= k:
            lo = i
        if j >= k:
            hi = j - 1
    return s.p[k]
