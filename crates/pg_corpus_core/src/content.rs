//! What counts as content in a text: the searchable contract's `min_length` and a parent's
//! required columns are measured with this rule, in every query that applies them (searches,
//! statistics, health checks), through `corpus._content_length` (the count) and
//! `corpus._has_content` (whether it reaches a minimum: what searches ask).
//!
//! A character is blank when it is Unicode White_Space, a Default_Ignorable_Code_Point
//! (zero-width characters, bidi marks and embeddings, the BOM, variation selectors, fillers,
//! tags) or a control character. Blank characters at either end are trimmed; inside, runs of
//! white space count as one character (the space between two words) and the other blank
//! characters, which show nothing, do not count.

/// Unicode White_Space (PropList.txt), as the standard library implements it.
pub fn is_white_space(c: char) -> bool {
    c.is_whitespace()
}

/// Unicode Default_Ignorable_Code_Point (DerivedCoreProperties.txt): characters that render
/// as nothing when a font has no glyph for them.
pub fn is_default_ignorable(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'..='\u{1160}'
            | '\u{17B4}'..='\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF0}'..='\u{FFF8}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
    )
}

/// White space, invisible (default-ignorable) or a control character: never content.
#[inline]
pub fn is_blank(c: char) -> bool {
    if c.is_ascii() {
        // ASCII's blanks are its controls and the space (its white space is \t..\r and ' ')
        return c <= ' ' || c == '\u{007F}';
    }
    is_white_space(c) || is_default_ignorable(c) || c.is_control()
}

/// The number of content characters of `text`: blank characters trimmed at both ends, each
/// inner run of white space counted once, inner invisible and control characters not counted.
pub fn content_length(text: &str) -> usize {
    content_length_up_to(text, usize::MAX)
}

/// Whether `text` holds at least `min` content characters ([`content_length`] ≥ `min`), read
/// only as far as needed.
pub fn has_content_length(text: &str, min: usize) -> bool {
    content_length_up_to(text, min) >= min
}

/// [`content_length`], the reading stopped once it reaches `limit`.
fn content_length_up_to(text: &str, limit: usize) -> usize {
    // one pass: a run of white space counts when content comes before and after it
    let (mut n, mut seen, mut space) = (0, false, false);
    for c in text.chars() {
        if n >= limit {
            break;
        }
        if !is_blank(c) {
            n += 1 + usize::from(space);
            seen = true;
            space = false;
        } else if seen && is_white_space(c) {
            space = true;
        }
        // (other blanks are invisible: neither content nor the end of a run of spaces)
    }
    n
}

/// The bytes of a text's beginning that usually hold `min` content characters (four bytes a
/// character, the most UTF-8 takes, and some room for spaces). A text's beginning never has
/// more content characters than the whole text, so when it has `min` the text has; when it
/// has fewer, the whole text is read.
pub fn content_prefix_bytes(min: usize) -> usize {
    min.saturating_mul(4).saturating_add(16)
}

/// The longest beginning of `bytes` that is whole UTF-8 characters (a prefix cut inside a
/// character loses that character; invalid bytes end it).
pub fn utf8_prefix(bytes: &[u8]) -> &str {
    match std::str::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
    }
}

/// Whether `text` holds any content character.
pub fn has_content(text: &str) -> bool {
    text.chars().any(|c| !is_blank(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One of each class of blank character.
    const BLANKS: &[(char, &str)] = &[
        ('\t', "tab"),
        ('\n', "line feed"),
        ('\r', "carriage return"),
        ('\u{000B}', "vertical tab"),
        ('\u{000C}', "form feed"),
        ('\u{0085}', "next line"),
        ('\u{00A0}', "no-break space"),
        ('\u{1680}', "ogham space"),
        ('\u{2003}', "em space"),
        ('\u{2028}', "line separator"),
        ('\u{202F}', "narrow no-break space"),
        ('\u{3000}', "ideographic space"),
        ('\u{200B}', "zero-width space"),
        ('\u{200C}', "zero-width non-joiner"),
        ('\u{200D}', "zero-width joiner"),
        ('\u{200E}', "left-to-right mark"),
        ('\u{200F}', "right-to-left mark"),
        ('\u{061C}', "arabic letter mark"),
        ('\u{202B}', "right-to-left embedding"),
        ('\u{2066}', "left-to-right isolate"),
        ('\u{2060}', "word joiner"),
        ('\u{FEFF}', "byte order mark"),
        ('\u{00AD}', "soft hyphen"),
        ('\u{FE0F}', "variation selector"),
        ('\u{3164}', "hangul filler"),
        ('\u{E0041}', "tag latin capital a"),
        ('\u{0001}', "control"),
        ('\u{007F}', "delete"),
    ];

    /// The rule as written: trim blanks at both ends, count inner white space runs once.
    fn reference_length(text: &str) -> usize {
        let trimmed = text.trim_matches(|c: char| is_white_space(c) || is_default_ignorable(c) || c.is_control());
        let (mut n, mut in_space) = (0, false);
        for c in trimmed.chars() {
            if is_white_space(c) {
                n += usize::from(!in_space);
                in_space = true;
            } else if !(is_default_ignorable(c) || c.is_control()) {
                n += 1;
                in_space = false;
            }
        }
        n
    }

    proptest::proptest! {
        /// Reaching a minimum is the count reaching it, for the whole text and (from a
        /// beginning cut at any byte) never above the whole text's answer.
        #[test]
        fn a_minimum_is_reached_as_the_count_says_and_a_prefix_never_overstates_it(
            picks in proptest::collection::vec(0usize..64, 0..80), min in 0usize..70, cut in 0usize..400,
        ) {
            let alphabet: Vec<char> = BLANKS.iter().map(|b| b.0).chain(['a', 'ש', 'ž', ' ', '\u{05B8}', '😀']).collect();
            let text: String = picks.iter().map(|&i| alphabet[i % alphabet.len()]).collect();
            proptest::prop_assert_eq!(has_content_length(&text, min), content_length(&text) >= min, "{:?}", text);
            let prefix = utf8_prefix(&text.as_bytes()[..cut.min(text.len())]);
            proptest::prop_assert!(text.starts_with(prefix));
            proptest::prop_assert!(content_length(prefix) <= content_length(&text));
            if has_content_length(prefix, min) {
                proptest::prop_assert!(has_content_length(&text, min));
            }
        }

        #[test]
        fn the_one_pass_count_is_the_rule(
            picks in proptest::collection::vec(0usize..64, 0..60), ascii in proptest::collection::vec(0u8..128, 0..40),
        ) {
            let alphabet: Vec<char> = BLANKS.iter().map(|b| b.0).chain(['a', 'ש', 'ž', ' ', '\u{05B8}']).collect();
            let mut text: String = picks.iter().map(|&i| alphabet[i % alphabet.len()]).collect();
            text.extend(ascii.iter().map(|&b| char::from(b)));
            proptest::prop_assert_eq!(content_length(&text), reference_length(&text), "{:?}", text);
            for b in 0u8..128 {
                let c = char::from(b);
                proptest::prop_assert_eq!(is_blank(c), is_white_space(c) || is_default_ignorable(c) || c.is_control());
            }
        }
    }

    #[test]
    fn every_blank_class_alone_is_no_content() {
        for &(c, name) in BLANKS {
            let s: String = std::iter::repeat_n(c, 80).collect();
            assert_eq!(content_length(&s), 0, "{name}");
            assert!(!has_content(&s), "{name}");
        }
    }

    #[test]
    fn blank_padding_does_not_count() {
        for &(c, name) in BLANKS {
            let pad: String = std::iter::repeat_n(c, 40).collect();
            let s = format!("{pad}abc{pad}");
            assert_eq!(content_length(&s), 3, "{name}");
            assert!(has_content(&s), "{name}");
        }
    }

    #[test]
    fn inner_space_runs_count_once_and_invisible_characters_not_at_all() {
        assert_eq!(content_length("a b"), 3);
        assert_eq!(content_length("a \t\u{00A0}\u{3000}  b"), 3);
        assert_eq!(content_length("a\u{200B}\u{200F}\u{FEFF}b"), 2);
        assert_eq!(content_length("a \u{200B} b"), 3);
    }

    #[test]
    fn visible_text_counts_in_characters() {
        assert_eq!(content_length("שלום עולם"), 9);
        assert_eq!(content_length("  Příliš žluťoučký kůň  "), 20);
        // combining marks (niqqud) are characters of the text
        assert_eq!(content_length("שָׁלוֹם"), 7);
        assert_eq!(content_length(""), 0);
        assert_eq!(content_length("😀"), 1);
    }
}
