//! The bundled model's tokenizer, rebuilt from its GGUF vocabulary, and
//! streaming detokenization.

use afm_engine::loading::GgufModelFile;
use afm_engine::loading::ModelSource;
use afm_engine::loading::{IncrementalDecoder, TextTokenizer};

fn smollm2_tokenizer() -> TextTokenizer {
    let source = ModelSource::resolve("smollm2").expect("run scripts/setup.sh first");
    TextTokenizer::from_gguf(&GgufModelFile::open(source.path()).unwrap()).unwrap()
}

#[test]
fn special_tokens_in_text_encode_to_single_ids() {
    let tok = smollm2_tokenizer();
    let ids = tok.encode("<|im_start|>user\nhi<|im_end|>").unwrap();
    assert_eq!(ids.first(), tok.token_to_id("<|im_start|>").as_ref());
    assert_eq!(ids.last(), tok.token_to_id("<|im_end|>").as_ref());
    assert_eq!(tok.token_to_id("<|im_end|>"), Some(2));
}

#[test]
fn digits_are_split_one_per_token() {
    let tok = smollm2_tokenizer();
    let ids = tok.encode("12345").unwrap();
    assert_eq!(ids.len(), 5, "{ids:?}");
    let pieces: Vec<String> = ids.iter().map(|&i| tok.decode(&[i]).unwrap()).collect();
    assert_eq!(pieces, ["1", "2", "3", "4", "5"]);
}

#[test]
fn decode_inverts_encode_for_unicode_text() {
    let tok = smollm2_tokenizer();
    let text = "Héllo, wörld! 🙂 naïve café — 東京 ✓\n  indented\ttab";
    assert_eq!(tok.decode(&tok.encode(text).unwrap()).unwrap(), text);
}

#[test]
fn streaming_never_emits_half_a_character() {
    let tok = smollm2_tokenizer();
    let text = "Emoji 🙂🚀 and 東京 and é.";
    let ids = tok.encode(text).unwrap();
    // The test only means something if some character spans several tokens.
    let partial = ids
        .iter()
        .filter(|&&i| tok.decode(&[i]).unwrap().contains('\u{FFFD}'))
        .count();
    assert!(partial >= 2, "expected multi-token characters in {ids:?}");

    let mut dec = IncrementalDecoder::new();
    let mut out = String::new();
    let mut held = 0;
    for &id in &ids {
        let piece = dec.push(&tok, id).unwrap();
        assert!(
            !piece.contains('\u{FFFD}'),
            "half a character leaked: {piece:?}"
        );
        held += usize::from(piece.is_empty());
        out.push_str(&piece);
    }
    out.push_str(&dec.finish(&tok).unwrap());
    assert_eq!(out, text);
    assert!(held > 0, "some token should have been held back");
}

#[test]
fn a_character_cut_at_the_end_is_dropped_not_replaced() {
    let tok = smollm2_tokenizer();
    let ids = tok.encode("ok 🚀").unwrap();
    let whole = ids.len();
    // Stop one token short of the rocket's last byte.
    let mut dec = IncrementalDecoder::new();
    let mut out = String::new();
    for &id in &ids[..whole - 1] {
        out.push_str(&dec.push(&tok, id).unwrap());
    }
    out.push_str(&dec.finish(&tok).unwrap());
    assert!(tok.decode(&ids[..whole - 1]).unwrap().ends_with('\u{FFFD}'));
    assert_eq!(out, "ok ");
}
