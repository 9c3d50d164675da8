pub mod lemma;
