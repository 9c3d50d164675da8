//! Hebrew: attached prefix letters.
//!
//! Hebrew writes the conjunction ו, the article ה, the prepositions ב כ ל מ and the
//! subordinators ש כש מש לכש as letters attached to the next word, in a fixed order:
//! `[ו] [ש|כש|מש|לכש] [ה|ב|כ|ל|מ|מה]` (after ב כ ל the article is absorbed in unvocalised
//! writing: "בבית" is "in the house"). Without a lexicon a leading ב may also be the
//! word's own first letter ("ברית"), so the analyser does not replace the word: it keeps the
//! surface form and adds every form obtained by removing a prefix sequence allowed by that
//! grammar, as long as at least `min_rest` letters remain. "העוגיות" gives {העוגיות, עוגיות}
//! and "בעוגיות" gives {בעוגיות, עוגיות}: they meet on "עוגיות".

/// The prefix sequences of the grammar above, longest first, as strings of letters.
fn prefixes() -> &'static [&'static str] {
    // Generated once from the grammar; written out so that it is visible and testable.
    // conj ∈ {"", ו}; sub ∈ {"", ש, כש, מש, לכש}; prep ∈ {"", ה, ב, כ, ל, מ, מה}.
    static LIST: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    LIST.get_or_init(|| {
        let conj = ["", "ו"];
        let sub = ["", "ש", "כש", "מש", "לכש"];
        let prep = ["", "ה", "ב", "כ", "ל", "מ", "מה"];
        let mut v: Vec<String> = Vec::new();
        for c in conj {
            for s in sub {
                for p in prep {
                    let x = format!("{c}{s}{p}");
                    if !x.is_empty() && !v.contains(&x) {
                        v.push(x);
                    }
                }
            }
        }
        v.sort_by(|a, b| b.chars().count().cmp(&a.chars().count()).then(a.cmp(b)));
        v.into_iter().map(|s| &*Box::leak(s.into_boxed_str())).collect()
    })
}

/// Forms of `word` (already folded: no points, no final letters, no geresh) with a prefix
/// sequence removed, each leaving at least `min_rest` letters; distinct, in a fixed order
/// (shortest remainder first). Only words made of Hebrew letters are considered.
pub(crate) fn prefix_variants(word: &str, min_rest: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if !word.chars().all(super::normalize::is_hebrew_letter) {
        return out;
    }
    let n = word.chars().count();
    for p in prefixes() {
        let plen = p.chars().count();
        if n >= plen + min_rest.max(1) && word.starts_with(p) {
            let rest = &word[p.len()..];
            if !out.iter().any(|r| r == rest) {
                out.push(rest.to_string());
            }
        }
    }
    out
}

/// The light suffix variant: a plural ending ים / ות removed (at least `min_rest` letters
/// left), or a final ה/ת of the singular feminine removed, so that "עוגיה" and "עוגיות"
/// meet on "עוגי". Measured in docs/analysis.md; off by default.
pub(crate) fn suffix_variant(word: &str, min_rest: usize) -> Option<String> {
    let chars: Vec<char> = word.chars().collect();
    let n = chars.len();
    let strip = |k: usize| -> Option<String> {
        if n >= k + min_rest.max(2) {
            Some(chars[..n - k].iter().collect())
        } else {
            None
        }
    };
    if n >= 2 {
        let tail: String = chars[n - 2..].iter().collect();
        if tail == "ים" || tail == "ות" {
            return strip(2);
        }
    }
    match chars.last() {
        Some('ה') | Some('ת') => strip(1),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammar_yields_the_expected_sequences() {
        let p = prefixes();
        for must in ["ו", "ה", "ב", "כ", "ל", "מ", "ש", "וה", "שה", "כש", "וכשה", "ולכש", "ומה", "שב"]
        {
            assert!(p.contains(&must), "{must}");
        }
        for never in ["הו", "בה", "לו", "שו"] {
            assert!(!p.contains(&never), "{never}");
        }
        assert_eq!(p.len(), 69);
    }

    #[test]
    fn variants_meet() {
        let a = prefix_variants("העוגיות", 2);
        let b = prefix_variants("בעוגיות", 2);
        assert!(a.contains(&"עוגיות".to_string()));
        assert!(b.contains(&"עוגיות".to_string()));
        let c = prefix_variants("וכשהילד", 2);
        assert!(c.contains(&"ילד".to_string()), "{c:?}");
        // Too short a remainder is not produced.
        assert!(prefix_variants("בו", 2).is_empty());
    }
}
