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

/// A note for the report when `repetitions` rotations of `sides` sides do not give every side
/// each place equally often (the repetitions are not a multiple of the sides); `None` when they
/// do.
pub fn unbalanced(sides: usize, repetitions: usize) -> Option<String> {
    (sides > 1 && !repetitions.is_multiple_of(sides)).then(|| {
        format!(
            "Positions not balanced: the repetition count ({repetitions}) is not a multiple of the {sides} sides, so the rotation did not put every side in every place equally often; give `--repetitions` a multiple of {sides} to balance them."
        )
    })
}

#[cfg(test)]
mod tests {
    use super::{order, unbalanced};

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

    #[test]
    fn only_a_multiple_of_the_sides_is_balanced() {
        assert_eq!(unbalanced(4, 4), None);
        assert_eq!(unbalanced(4, 8), None);
        assert_eq!(unbalanced(3, 3), None);
        assert_eq!(unbalanced(1, 5), None);
        assert_eq!(unbalanced(0, 5), None);
        let note = unbalanced(4, 3).unwrap();
        assert!(note.contains("repetition count (3)"), "{note}");
        assert!(note.contains("multiple of 4"), "{note}");
        assert!(unbalanced(2, 1).is_some());
    }
}
