//! The order in which the sides of a comparison are measured within one repetition.
//!
//! Sides measured in a fixed order are not measured alike: the first side of every repetition
//! runs after the previous repetition's last side (with its dead rows, its WAL, its warm or cold
//! caches), the others after a side of their own comparison. With the sides rotated, each side
//! takes each place equally often over a number of repetitions that is a multiple of the number
//! of sides, so what a place costs falls on every side alike.

/// The indices of `sides` sides in the order repetition `repetition` measures them: `0..sides`
/// rotated left by `repetition` places.
pub fn order(sides: usize, repetition: usize) -> impl Iterator<Item = usize> {
    let start = if sides == 0 { 0 } else { repetition % sides };
    (0..sides).map(move |place| (start + place) % sides)
}

#[cfg(test)]
mod tests {
    use super::order;

    #[test]
    fn every_side_once_per_repetition() {
        for sides in 0..6 {
            for repetition in 0..12 {
                let mut seen: Vec<usize> = order(sides, repetition).collect();
                seen.sort_unstable();
                assert_eq!(seen, (0..sides).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn each_side_takes_each_place_once_per_cycle() {
        let sides = 4;
        let mut firsts: Vec<usize> = (0..sides)
            .map(|repetition| order(sides, repetition).next().unwrap())
            .collect();
        firsts.sort_unstable();
        assert_eq!(firsts, vec![0, 1, 2, 3]);
        assert_eq!(order(3, 1).collect::<Vec<_>>(), vec![1, 2, 0]);
        assert_eq!(order(2, 5).collect::<Vec<_>>(), vec![1, 0]);
    }
}
