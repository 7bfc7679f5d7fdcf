//! Go's `sort.Slice`, reproduced permutation for permutation.
//!
//! Upstream sorts some lists with Go's unstable sort (pattern-defeating quicksort, go1.19+), whose
//! order among equal elements is not random but a fixed function of the input order. Where that
//! order decides a placement (the in-flight NodeClaims a pod tries first, re-sorted by pod count
//! before every pod), reproducing the algorithm exactly, rather than choosing another tie-break,
//! makes our decisions upstream's. Behaviour mirrored: Go's `sort/zsortfunc.go` (`pdqsort_func` with
//! insertion sort up to 12 elements, heapsort after `bits.Len(n)` bad pivots, ninther pivots from
//! 50 elements, pattern breaking with an xorshift seeded by the length).

/// Sorts `v` exactly as Go's `sort.Slice(v, less)` would.
pub fn sort_slice<T>(v: &mut [T], less: impl Fn(&T, &T) -> bool) {
    let n = v.len();
    let limit = usize::BITS - n.leading_zeros();
    let mut s = Sorter { v, less };
    s.pdqsort(0, n, limit);
}

struct Sorter<'a, T, F> {
    v: &'a mut [T],
    less: F,
}

#[derive(PartialEq)]
enum Hint {
    Unknown,
    Increasing,
    Decreasing,
}

impl<T, F: Fn(&T, &T) -> bool> Sorter<'_, T, F> {
    fn less(&self, i: usize, j: usize) -> bool {
        (self.less)(&self.v[i], &self.v[j])
    }

    fn swap(&mut self, i: usize, j: usize) {
        self.v.swap(i, j);
    }

    fn insertion_sort(&mut self, a: usize, b: usize) {
        for i in a + 1..b {
            let mut j = i;
            while j > a && self.less(j, j - 1) {
                self.swap(j, j - 1);
                j -= 1;
            }
        }
    }

    fn sift_down(&mut self, lo: usize, hi: usize, first: usize) {
        let mut root = lo;
        loop {
            let mut child = 2 * root + 1;
            if child >= hi {
                return;
            }
            if child + 1 < hi && self.less(first + child, first + child + 1) {
                child += 1;
            }
            if !self.less(first + root, first + child) {
                return;
            }
            self.swap(first + root, first + child);
            root = child;
        }
    }

    fn heap_sort(&mut self, a: usize, b: usize) {
        let (first, hi) = (a, b - a);
        for i in (0..=(hi - 1) / 2).rev() {
            self.sift_down(i, hi, first);
        }
        for i in (0..hi).rev() {
            self.swap(first, first + i);
            self.sift_down(0, i, first);
        }
    }

    fn pdqsort(&mut self, mut a: usize, mut b: usize, mut limit: u32) {
        const MAX_INSERTION: usize = 12;
        let (mut was_balanced, mut was_partitioned) = (true, true);
        loop {
            let length = b - a;
            if length <= MAX_INSERTION {
                self.insertion_sort(a, b);
                return;
            }
            if limit == 0 {
                self.heap_sort(a, b);
                return;
            }
            if !was_balanced {
                self.break_patterns(a, b);
                limit -= 1;
            }
            let (mut pivot, mut hint) = self.choose_pivot(a, b);
            if hint == Hint::Decreasing {
                self.reverse_range(a, b);
                pivot = (b - 1) - (pivot - a);
                hint = Hint::Increasing;
            }
            if was_balanced && was_partitioned && hint == Hint::Increasing && self.partial_insertion_sort(a, b) {
                return;
            }
            if a > 0 && !self.less(a - 1, pivot) {
                a = self.partition_equal(a, b, pivot);
                continue;
            }
            let (mid, already) = self.partition(a, b, pivot);
            was_partitioned = already;
            let (left, right) = (mid - a, b - mid);
            let threshold = length / 8;
            if left < right {
                was_balanced = left >= threshold;
                self.pdqsort(a, mid, limit);
                a = mid + 1;
            } else {
                was_balanced = right >= threshold;
                self.pdqsort(mid + 1, b, limit);
                b = mid;
            }
        }
    }

    fn partition(&mut self, a: usize, b: usize, pivot: usize) -> (usize, bool) {
        self.swap(a, pivot);
        // i and j are inclusive bounds of what is left to partition; j may step below a + 1.
        let (mut i, mut j) = (a as isize + 1, b as isize - 1);
        while i <= j && self.less(i as usize, a) {
            i += 1;
        }
        while i <= j && !self.less(j as usize, a) {
            j -= 1;
        }
        if i > j {
            self.swap(j as usize, a);
            return (j as usize, true);
        }
        self.swap(i as usize, j as usize);
        i += 1;
        j -= 1;
        loop {
            while i <= j && self.less(i as usize, a) {
                i += 1;
            }
            while i <= j && !self.less(j as usize, a) {
                j -= 1;
            }
            if i > j {
                break;
            }
            self.swap(i as usize, j as usize);
            i += 1;
            j -= 1;
        }
        self.swap(j as usize, a);
        (j as usize, false)
    }

    fn partition_equal(&mut self, a: usize, b: usize, pivot: usize) -> usize {
        self.swap(a, pivot);
        let (mut i, mut j) = (a as isize + 1, b as isize - 1);
        loop {
            while i <= j && !self.less(a, i as usize) {
                i += 1;
            }
            while i <= j && self.less(a, j as usize) {
                j -= 1;
            }
            if i > j {
                break;
            }
            self.swap(i as usize, j as usize);
            i += 1;
            j -= 1;
        }
        i as usize
    }

    fn partial_insertion_sort(&mut self, a: usize, b: usize) -> bool {
        const MAX_STEPS: usize = 5;
        const SHORTEST_SHIFTING: usize = 50;
        let mut i = a + 1;
        for _ in 0..MAX_STEPS {
            while i < b && !self.less(i, i - 1) {
                i += 1;
            }
            if i == b {
                return true;
            }
            if b - a < SHORTEST_SHIFTING {
                return false;
            }
            self.swap(i, i - 1);
            if i - a >= 2 {
                let mut j = i - 1;
                while j >= 1 {
                    if !self.less(j, j - 1) {
                        break;
                    }
                    self.swap(j, j - 1);
                    j -= 1;
                }
            }
            if b - i >= 2 {
                for j in i + 1..b {
                    if !self.less(j, j - 1) {
                        break;
                    }
                    self.swap(j, j - 1);
                }
            }
        }
        false
    }

    fn break_patterns(&mut self, a: usize, b: usize) {
        let length = b - a;
        if length < 8 {
            return;
        }
        let mut random = length as u64;
        let modulus = 1usize << (usize::BITS - length.leading_zeros());
        let start = a + (length / 4) * 2 - 1;
        for idx in start..=start + 2 {
            random ^= random << 13;
            random ^= random >> 7;
            random ^= random << 17;
            let mut other = (random as usize) & (modulus - 1);
            if other >= length {
                other -= length;
            }
            self.swap(idx, a + other);
        }
    }

    fn choose_pivot(&mut self, a: usize, b: usize) -> (usize, Hint) {
        const SHORTEST_NINTHER: usize = 50;
        const MAX_SWAPS: usize = 4 * 3;
        let l = b - a;
        let mut swaps = 0;
        let (mut i, mut j, mut k) = (a + l / 4, a + l / 4 * 2, a + l / 4 * 3);
        if l >= 8 {
            if l >= SHORTEST_NINTHER {
                i = self.median(i - 1, i, i + 1, &mut swaps);
                j = self.median(j - 1, j, j + 1, &mut swaps);
                k = self.median(k - 1, k, k + 1, &mut swaps);
            }
            j = self.median(i, j, k, &mut swaps);
        }
        let hint = match swaps {
            0 => Hint::Increasing,
            MAX_SWAPS => Hint::Decreasing,
            _ => Hint::Unknown,
        };
        (j, hint)
    }

    fn order2(&self, a: usize, b: usize, swaps: &mut usize) -> (usize, usize) {
        if self.less(b, a) {
            *swaps += 1;
            (b, a)
        } else {
            (a, b)
        }
    }

    fn median(&self, a: usize, b: usize, c: usize, swaps: &mut usize) -> usize {
        let (a, b) = self.order2(a, b, swaps);
        let (b, c) = self.order2(b, c, swaps);
        let (_a, b) = self.order2(a, b, swaps);
        let _ = c;
        b
    }

    fn reverse_range(&mut self, a: usize, b: usize) {
        let (mut i, mut j) = (a, b - 1);
        while i < j {
            self.swap(i, j);
            i += 1;
            j -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::sort_slice;

    /// Vectors from Go's own `sort.Slice` (tests/oracle/cmd/gosort-vectors, Go 1.26): lengths from
    /// 5 to 1,000 over few distinct keys, so ties, insertion sort, ninther pivots, equal-element
    /// partitions and pattern breaking are all exercised.
    #[test]
    fn same_permutations_as_go() {
        let vectors = include_str!("go_sort_vectors.txt");
        let mut checked = 0;
        for line in vectors.lines() {
            let (keys, expected) = line.split_once('|').unwrap();
            let keys: Vec<u32> = keys.split(',').map(|k| k.parse().unwrap()).collect();
            let expected: Vec<usize> = expected.split(',').map(|k| k.parse().unwrap()).collect();
            let mut idx: Vec<usize> = (0..keys.len()).collect();
            sort_slice(&mut idx, |a, b| keys[*a] < keys[*b]);
            assert_eq!(idx, expected, "{} keys", keys.len());
            checked += 1;
        }
        assert_eq!(checked, 12);
    }

    #[test]
    fn sorts() {
        let mut v: Vec<i32> = (0..500).map(|i| (i * 7919) % 263).collect();
        sort_slice(&mut v, |a, b| a < b);
        assert!(v.windows(2).all(|w| w[0] <= w[1]));
        let mut empty: Vec<i32> = Vec::new();
        sort_slice(&mut empty, |a, b| a < b);
    }
}
