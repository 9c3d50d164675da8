//! The languages a source's text is analysed in.

use std::fmt;

/// The language declared for a source. `Simple` folds case and diacritics and normalises
/// Hebrew spelling but does not stem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Language {
    Simple,
    Arabic,
    Czech,
    Danish,
    Dutch,
    English,
    Finnish,
    French,
    German,
    Greek,
    Hebrew,
    Hungarian,
    Italian,
    Norwegian,
    Portuguese,
    Romanian,
    Russian,
    Spanish,
    Swedish,
    Tamil,
    Turkish,
}

/// Every language with its canonical name and the ISO 639-1 code also accepted.
pub const LANGUAGES: &[(Language, &str, &str)] = &[
    (Language::Simple, "simple", "simple"),
    (Language::Arabic, "arabic", "ar"),
    (Language::Czech, "czech", "cs"),
    (Language::Danish, "danish", "da"),
    (Language::Dutch, "dutch", "nl"),
    (Language::English, "english", "en"),
    (Language::Finnish, "finnish", "fi"),
    (Language::French, "french", "fr"),
    (Language::German, "german", "de"),
    (Language::Greek, "greek", "el"),
    (Language::Hebrew, "hebrew", "he"),
    (Language::Hungarian, "hungarian", "hu"),
    (Language::Italian, "italian", "it"),
    (Language::Norwegian, "norwegian", "no"),
    (Language::Portuguese, "portuguese", "pt"),
    (Language::Romanian, "romanian", "ro"),
    (Language::Russian, "russian", "ru"),
    (Language::Spanish, "spanish", "es"),
    (Language::Swedish, "swedish", "sv"),
    (Language::Tamil, "tamil", "ta"),
    (Language::Turkish, "turkish", "tr"),
];

impl Language {
    /// The canonical name ("english").
    pub fn name(self) -> &'static str {
        LANGUAGES.iter().find(|(l, _, _)| *l == self).map(|(_, f, _)| *f).unwrap_or("simple")
    }

    /// Every supported language, `Simple` first.
    pub fn all() -> Vec<Language> {
        LANGUAGES.iter().map(|(l, _, _)| *l).collect()
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
