//! Character-level normalisation: the text-wide pass before word segmentation, the per-word
//! fold (case, Hebrew points, final letters, quote marks), and diacritic folding.
//!
//! Everything here is a pure function of its input, runs in time linear in it, and allocates
//! at most a constant factor of it.

use unicode_normalization::UnicodeNormalization;

/// Hebrew geresh (U+05F3). UAX #29 gives it Word_Break=ALetter: it stays inside a word.
pub(crate) const GERESH: char = '\u{05F3}';
/// Hebrew gershayim (U+05F4). UAX #29 gives it Word_Break=MidLetter: a word goes on across
/// it when letters stand on both sides.
pub(crate) const GERSHAYIM: char = '\u{05F4}';

/// A Hebrew letter (consonant), final forms and Yiddish digraphs included.
pub(crate) fn is_hebrew_letter(c: char) -> bool {
    matches!(c, '\u{05D0}'..='\u{05EA}' | '\u{05EF}'..='\u{05F2}' | '\u{FB1D}'..='\u{FB4F}')
}

/// Hebrew points (niqqud), cantillation marks (te'amim) and the other combining marks of the
/// Hebrew block. Not the punctuation that shares the block: maqaf U+05BE, paseq U+05C0, sof
/// pasuq U+05C3, nun hafukha U+05C6.
pub(crate) fn is_hebrew_mark(c: char) -> bool {
    matches!(
        c,
        '\u{0591}'
            ..='\u{05BD}' | '\u{05BF}' | '\u{05C1}' | '\u{05C2}' | '\u{05C4}' | '\u{05C5}' | '\u{05C7}' | '\u{FB1E}'
    )
}

/// Combining marks that are diacritics to fold away: the generic combining diacritics, the
/// Cyrillic ones, Hebrew points and cantillation, Arabic harakat. Marks that carry letters of
/// other scripts (Indic vowel signs and viramas, Thai vowels and tones, ...) are kept: removing
/// them would merge different words.
pub(crate) fn is_foldable_mark(c: char) -> bool {
    matches!(c,
        '\u{0300}'..='\u{036F}' | '\u{1AB0}'..='\u{1AFF}' | '\u{1DC0}'..='\u{1DFF}'
        | '\u{20D0}'..='\u{20FF}' | '\u{FE20}'..='\u{FE2F}'
        | '\u{0483}'..='\u{0489}'
        | '\u{0610}'..='\u{061A}' | '\u{064B}'..='\u{065F}' | '\u{0670}'
        | '\u{06D6}'..='\u{06DC}' | '\u{06DF}'..='\u{06E4}' | '\u{06E7}' | '\u{06E8}'
        | '\u{06EA}'..='\u{06ED}')
        || is_hebrew_mark(c)
}

/// Invisible format characters removed before segmentation (bidirectional marks and
/// embeddings, soft hyphen, zero-width joiners, word joiner, BOM, variation selectors, tags).
fn is_dropped_format(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200C}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
        | '\u{FFA0}' | '\u{FFF0}'..='\u{FFF8}' | '\u{1BCA0}'..='\u{1BCA3}'
        | '\u{1D173}'..='\u{1D17A}' | '\u{E0000}'..='\u{E0FFF}')
}

/// Characters that separate words without UAX #29 seeing a break (zero-width space) or that
/// should never glue words (line/paragraph separators are breaks already).
fn is_space_like(c: char) -> bool {
    matches!(c, '\u{200B}')
}

/// Marks used as gershayim (abbreviations: ע"מ, רשב״י) when they stand between two Hebrew
/// letters.
fn is_double_quote_like(c: char) -> bool {
    matches!(c, '"' | GERSHAYIM | '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' | '\u{02BA}')
}

/// Marks used as geresh (ר', ג'ירפה) after a Hebrew letter.
fn is_single_quote_like(c: char) -> bool {
    matches!(
        c,
        '\'' | GERESH | '\u{2018}' | '\u{2019}' | '\u{201B}' | '\u{2032}' | '`' | '\u{00B4}' | '\u{02B9}' | '\u{02BC}'
    )
}

/// The text-wide pass: NFKC (over the stream-safe form, so that no run of combining marks is
/// longer than 30 and canonical reordering stays linear), invisible format characters removed, zero-width space made a
/// space, and the quote marks of Hebrew abbreviations made uniform so that UAX #29 keeps the
/// abbreviation one word whatever mark the writer typed:
/// - a double-quote-like mark between two Hebrew letters (points in between allowed) becomes
///   gershayim U+05F4 (MidLetter), so ע"מ, ע״מ and ע”מ are all one word;
/// - a single-quote-like mark right after a Hebrew letter becomes geresh U+05F3 (ALetter), so
///   ר' and ר׳ are one word.
pub(crate) fn prepare(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    // Was the last non-mark character pushed a Hebrew letter?
    let mut after_hebrew_letter = false;
    let mut it = text.stream_safe().nfkc().filter(|&c| !is_dropped_format(c)).peekable();
    while let Some(c) = it.next() {
        if is_space_like(c) {
            out.push(' ');
            after_hebrew_letter = false;
            continue;
        }
        if after_hebrew_letter && is_double_quote_like(c) {
            if it.peek().copied().is_some_and(is_hebrew_letter) {
                out.push(GERSHAYIM);
                after_hebrew_letter = false;
                continue;
            }
        } else if after_hebrew_letter && is_single_quote_like(c) {
            out.push(GERESH);
            after_hebrew_letter = false;
            continue;
        }
        out.push(c);
        if is_hebrew_letter(c) {
            after_hebrew_letter = true;
        } else if !is_hebrew_mark(c) {
            after_hebrew_letter = false;
        }
    }
    out
}

/// Apostrophe-like characters that may survive inside a UAX #29 word (after [`prepare`]).
pub(crate) fn is_apostrophe(c: char) -> bool {
    matches!(c, '\'' | '\u{2018}' | '\u{2019}' | '\u{FF07}' | GERESH | GERSHAYIM | '"')
}

/// Hebrew final letters to their ordinary forms: ך→כ ם→מ ן→נ ף→פ ץ→צ; Yiddish digraphs to
/// their letters: װ→וו ױ→וי ײ→יי. Returns the replacement, if any.
pub(crate) fn hebrew_letter_fold(c: char) -> Option<&'static str> {
    Some(match c {
        '\u{05DA}' => "\u{05DB}",
        '\u{05DD}' => "\u{05DE}",
        '\u{05DF}' => "\u{05E0}",
        '\u{05E3}' => "\u{05E4}",
        '\u{05E5}' => "\u{05E6}",
        '\u{05F0}' => "\u{05D5}\u{05D5}",
        '\u{05F1}' => "\u{05D5}\u{05D9}",
        '\u{05F2}' => "\u{05D9}\u{05D9}",
        _ => return None,
    })
}

/// Letters that NFD does not decompose but that are diacritic variants for searching
/// purposes. ß and ẞ become "ss" (German's own rule).
fn special_fold(c: char) -> Option<&'static str> {
    Some(match c {
        'ß' | 'ẞ' => "ss",
        'ø' => "o",
        'đ' => "d",
        'ð' => "d",
        'ł' => "l",
        'ħ' => "h",
        'ı' => "i",
        'ŀ' => "l",
        'æ' => "ae",
        'œ' => "oe",
        'þ' => "th",
        'ſ' => "s",
        _ => return None,
    })
}

/// Diacritic folding of an already lower-cased word: canonical decomposition, foldable marks
/// removed (see [`is_foldable_mark`]), special letters mapped (ß→ss, ø→o, ł→l, æ→ae, ...),
/// canonical recomposition (NFC) of what is left.
pub(crate) fn fold_diacritics(word: &str) -> String {
    if word.is_ascii() {
        return word.to_string();
    }
    let mut tmp = String::with_capacity(word.len());
    for c in word.nfd() {
        if is_foldable_mark(c) {
            continue;
        }
        match special_fold(c) {
            Some(s) => tmp.push_str(s),
            None => tmp.push(c),
        }
    }
    if tmp.chars().all(|c| (c as u32) < 0x300) {
        // Nothing left that could recompose.
        return tmp;
    }
    tmp.nfc().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepare_unifies_gershayim_and_geresh() {
        for s in ["ע\"מ", "ע״מ", "ע”מ", "ע“מ"] {
            assert_eq!(prepare(s), "ע\u{05F4}מ", "{s}");
        }
        assert_eq!(prepare("ר' שמעון"), "ר\u{05F3} שמעון");
        assert_eq!(prepare("ר’ שמעון"), "ר\u{05F3} שמעון");
        // A closing quote is not gershayim.
        assert_eq!(prepare("\"שלום\" אמר"), "\"שלום\" אמר");
        // Latin apostrophes are left alone.
        assert_eq!(prepare("don't"), "don't");
    }

    #[test]
    fn prepare_drops_invisible_format_characters() {
        assert_eq!(prepare("a\u{200E}b\u{200F}c\u{00AD}d\u{FEFF}"), "abcd");
        assert_eq!(prepare("a\u{200B}b"), "a b");
        assert_eq!(prepare("ﬁnance"), "finance");
    }

    #[test]
    fn diacritics_fold() {
        assert_eq!(fold_diacritics("kolibřík"), "kolibrik");
        assert_eq!(fold_diacritics("straße"), "strasse");
        assert_eq!(fold_diacritics("über"), "uber");
        assert_eq!(fold_diacritics("ůžěčťďň"), "uzectdn");
        assert_eq!(fold_diacritics("ελληνικά"), "ελληνικα");
        assert_eq!(fold_diacritics("ёлка"), "елка");
        // Devanagari vowel signs and virama are letters' parts, not diacritics.
        assert_eq!(fold_diacritics("हिन्दी"), "हिन्दी");
    }
}
