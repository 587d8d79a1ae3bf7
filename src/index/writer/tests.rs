use super::*;

#[test]
fn changes_in_a_row_are_held_until_the_pace_or_a_waiting_search() {
    let ms = Duration::from_millis;
    // (changes a note, since the last publish, urgent) → published now
    let table = [
        (true, None, false, true),          // the first change ever
        (true, Some(ms(500)), false, true), // after a quiet moment
        (true, Some(PUBLISH_EVERY), false, true),
        (true, Some(ms(3)), false, false), // in a row: held
        (true, Some(ms(3)), true, true),   // a search waits, or the start-up sync
        (false, Some(ms(3)), false, true), // no note changed (an attachment's seq)
    ];
    for (dirty, since, urgent, want) in table {
        assert_eq!(
            publish_now(dirty, since, urgent),
            want,
            "dirty {dirty}, since {since:?}, urgent {urgent}"
        );
    }
}
