use super::*;

const NOW: u64 = 1_800_000_000_000;

fn key(byte: u8) -> GossipKey {
    GossipKey::from_bytes(&[byte; 32])
}

fn sealed(sealer: &mut Sealer, payload: &[u8], at: u64) -> Vec<u8> {
    let mut out = Vec::new();
    sealer.seal(payload, at, &mut out);
    out
}

#[test]
fn a_sealed_packet_opens_to_its_payload_once() {
    let mut sealer = Sealer::new(key(1), 7);
    let mut opener = Opener::new(key(1));
    let packet = sealed(&mut sealer, b"syn", NOW);
    assert_eq!(packet.len(), 3 + OVERHEAD);
    assert_eq!(opener.open(&packet, NOW + 5), Ok(&b"syn"[..]));
    assert_eq!(opener.open(&packet, NOW + 6), Err(Rejected::Replayed));
}

#[test]
fn another_key_or_an_altered_byte_is_forged() {
    let mut sealer = Sealer::new(key(1), 7);
    let mut opener = Opener::new(key(2));
    let packet = sealed(&mut sealer, b"syn", NOW);
    assert_eq!(opener.open(&packet, NOW), Err(Rejected::Forged));

    let mut opener = Opener::new(key(1));
    for at in 0..packet.len() {
        let mut altered = packet.clone();
        altered[at] ^= 0x01;
        let got = opener.open(&altered, NOW);
        assert!(
            matches!(got, Err(Rejected::Forged | Rejected::Malformed)),
            "byte {at} altered: {got:?}"
        );
    }
    // The untouched packet still opens: the altered ones left no trace.
    assert!(opener.open(&packet, NOW).is_ok());
}

#[test]
fn short_or_foreign_packets_are_malformed() {
    let mut opener = Opener::new(key(1));
    assert_eq!(opener.open(b"", NOW), Err(Rejected::Malformed));
    assert_eq!(
        opener.open(&[0u8; OVERHEAD - 1], NOW),
        Err(Rejected::Malformed)
    );
    // A plain chitchat packet (no envelope) is not read.
    let mut plain = vec![0u8; 200];
    plain[..4].copy_from_slice(b"SYN!");
    assert_eq!(opener.open(&plain, NOW), Err(Rejected::Malformed));
}

#[test]
fn packets_reordered_within_the_window_open_and_each_only_once() {
    let mut sealer = Sealer::new(key(1), 9);
    let mut opener = Opener::new(key(1));
    let packets: Vec<_> = (0..100).map(|i| sealed(&mut sealer, &[i], NOW)).collect();
    // Newest first, then the rest backwards: those within 64 of the newest
    // open, older ones are refused (the window cannot tell them apart).
    assert!(opener.open(&packets[99], NOW).is_ok());
    for i in (0..99).rev() {
        let got = opener.open(&packets[i], NOW);
        if 99 - i < 64 {
            assert_eq!(got, Ok(&[i as u8][..]), "packet {i}");
        } else {
            assert_eq!(got, Err(Rejected::Replayed), "packet {i}");
        }
    }
    for packet in &packets {
        assert!(opener.open(packet, NOW).is_err());
    }
}

#[test]
fn packets_sent_beyond_the_skew_are_stale() {
    let mut sealer = Sealer::new(key(1), 3);
    let mut opener = Opener::new(key(1));
    let old = sealed(&mut sealer, b"a", NOW - MAX_SKEW_MS - 1);
    let future = sealed(&mut sealer, b"b", NOW + MAX_SKEW_MS + 1);
    let edge = sealed(&mut sealer, b"c", NOW - MAX_SKEW_MS);
    assert_eq!(opener.open(&old, NOW), Err(Rejected::Stale));
    assert_eq!(opener.open(&future, NOW), Err(Rejected::Stale));
    assert!(opener.open(&edge, NOW).is_ok());
}

#[test]
fn a_forgotten_session_cannot_be_replayed() {
    let mut sealer = Sealer::new(key(1), 5);
    let mut opener = Opener::new(key(1));
    let packet = sealed(&mut sealer, b"a", NOW);
    assert!(opener.open(&packet, NOW).is_ok());
    // Another sender's packet, long after: the first session is forgotten...
    let mut other = Sealer::new(key(1), 6);
    let later = NOW + 2 * MAX_SKEW_MS + 1_001;
    assert!(opener.open(&sealed(&mut other, b"b", later), later).is_ok());
    assert_eq!(opener.sessions(), 1);
    // ...and its packet replayed now is too old to open.
    assert_eq!(opener.open(&packet, later), Err(Rejected::Stale));
}

#[test]
fn a_restarted_sender_is_a_new_session() {
    let mut opener = Opener::new(key(1));
    let mut before = Sealer::new(key(1), 10);
    let mut after = Sealer::new(key(1), 11);
    assert!(opener.open(&sealed(&mut before, b"x", NOW), NOW).is_ok());
    // The new life counts from 1 again; its packets are not replays.
    assert!(opener
        .open(&sealed(&mut after, b"y", NOW + 1), NOW + 1)
        .is_ok());
    assert_eq!(opener.sessions(), 2);
}

#[test]
fn sessions_are_bounded() {
    let mut opener = Opener::new(key(1));
    for session in 0..MAX_SESSIONS as u64 {
        let mut sealer = Sealer::new(key(1), session);
        assert!(opener.open(&sealed(&mut sealer, b"s", NOW), NOW).is_ok());
    }
    let mut one_more = Sealer::new(key(1), u64::MAX);
    let packet = sealed(&mut one_more, b"s", NOW);
    assert_eq!(opener.open(&packet, NOW), Err(Rejected::Crowded));
    // Once the others expire, it gets in.
    let later = NOW + 2 * MAX_SKEW_MS + 1_001;
    let mut one_more = Sealer::new(key(1), u64::MAX);
    assert!(opener
        .open(&sealed(&mut one_more, b"s", later), later)
        .is_ok());
}

#[test]
fn keys_are_read_as_hex_of_at_least_32_bytes() {
    let hex = GossipKey::generate_hex();
    assert_eq!(hex.len(), 64);
    assert!(GossipKey::from_hex(&format!("  {hex}\n")).is_ok());
    assert_ne!(hex, GossipKey::generate_hex());
    assert_eq!(
        GossipKey::from_hex("abcd").unwrap_err(),
        KeyError::Format("too short")
    );
    assert_eq!(
        GossipKey::from_hex(&"zz".repeat(32)).unwrap_err(),
        KeyError::Format("not hex")
    );
    assert!(!format!("{:?}", GossipKey::from_hex(&hex).unwrap()).contains(&hex[..8]));
}
