//! Counters declared where they live. A part's counter struct is written with `counters!`,
//! which makes every field name its result key (`= "swap.out"`) or say why it has none:
//! `= by_hand` (reported another way: an array per size or order, or a part of a derived
//! figure, by `stats::Results::collect`) or `= not_a_counter` (state kept beside the counters,
//! such as a scanner's position). The results then collect every keyed field through `Counters::each`,
//! so a new counter cannot be forgotten: a field without a key does not compile.

/// A struct of counters that names each of its scalar counters.
pub trait Counters {
    /// Every keyed counter with its result name, in declaration order.
    fn each(&self, f: &mut dyn FnMut(&'static str, u64));
}

/// Declares a struct whose every field carries `= "result.key"`, `= by_hand` or
/// `= not_a_counter`, and implements
/// `Counters` for it. Attributes and doc comments pass through.
#[macro_export]
macro_rules! counters {
    (
        $(#[$m:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$fm:meta])* $fvis:vis $field:ident : $ty:ty = $key:tt ),* $(,)?
        }
    ) => {
        $(#[$m])*
        $vis struct $name { $( $(#[$fm])* $fvis $field: $ty ),* }
        impl $crate::counters::Counters for $name {
            fn each(&self, f: &mut dyn FnMut(&'static str, u64)) {
                $( $crate::counters!(@put f, self.$field, $key); )*
            }
        }
    };
    (@put $f:ident, $v:expr, by_hand) => {};
    (@put $f:ident, $v:expr, not_a_counter) => {};
    (@put $f:ident, $v:expr, $key:literal) => {
        $f($key, $v)
    };
}

#[cfg(test)]
mod tests {
    use super::Counters;

    crate::counters! {
        #[derive(Default)]
        struct Example {
            /// A counter with a key.
            hits: u64 = "example.hits",
            misses: u64 = "example.misses",
            /// Reported per size elsewhere.
            by_size: [u64; 2] = by_hand,
            /// Where a scan resumes.
            cursor: u64 = not_a_counter,
        }
    }

    #[test]
    fn every_keyed_field_is_visited_once_in_order() {
        let e = Example { hits: 3, misses: 5, by_size: [1, 2], cursor: 7 };
        let mut seen = Vec::new();
        e.each(&mut |k, v| seen.push((k, v)));
        assert_eq!(seen, vec![("example.hits", 3), ("example.misses", 5)]);
        assert_eq!(e.by_size.iter().sum::<u64>() + e.cursor, 10);
        assert_eq!(Example::default().hits, 0);
    }
}
