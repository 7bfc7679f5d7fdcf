//! Requirements unit and property tests: operators, intersections, compatibility and its
//! reasons, against upstream's `requirement_test.go` and `requirements_test.go` cases.

use super::requirement::*;
use super::set::*;
use super::*;
use crate::labels::{ARCH, INSTANCE_TYPE, OS, TOPOLOGY_REGION, TOPOLOGY_ZONE};
use proptest::prelude::*;

#[test]
fn interned_lookup_agrees_with_lookup_by_name() {
    let mut set = Requirements::new();
    for key in [TOPOLOGY_ZONE, "example.com/team", ARCH, "kubernetes.io/os"] {
        set.add(Requirement::in_values(key, &["a"]));
    }
    for key in [TOPOLOGY_ZONE, "example.com/team", ARCH, OS, INSTANCE_TYPE, "example.com/other"] {
        let owned = key.to_string(); // not the static string itself
        assert_eq!(set.get_interned(&InternedKey::new(&owned)), set.get_ref(key), "{key}");
    }
}

// -----------------------------------------------------------------------------------------------------------
// Fixtures: the fourteen requirements of upstream's requirement_test.go, in its column order.
// -----------------------------------------------------------------------------------------------------------

const NAMES: [&str; 14] =
    ["exists", "dne", "inA", "inB", "inAB", "notInA", "in1", "in9", "in19", "notIn12", "gt1", "gt9", "lt1", "lt9"];

/// The fixture `name` on key `key`; `flex` gives it upstream's "WithFlexibility" minValues.
fn fixture_on(key: &str, name: &str, flex: bool) -> Requirement {
    let (op, values, min): (Operator, &[&str], i64) = match name {
        "exists" => (Operator::Exists, &[], 1),
        "dne" => (Operator::DoesNotExist, &[], 1),
        "inA" => (Operator::In, &["A"], 1),
        "inB" => (Operator::In, &["B"], 1),
        "inAB" => (Operator::In, &["A", "B"], 2),
        "notInA" => (Operator::NotIn, &["A"], 1),
        "in1" => (Operator::In, &["1"], 1),
        "in9" => (Operator::In, &["9"], 1),
        "in19" => (Operator::In, &["1", "9"], 2),
        "notIn12" => (Operator::NotIn, &["1", "2"], 2),
        "gt1" => (Operator::Gt, &["1"], 1),
        "gt9" => (Operator::Gt, &["9"], 1),
        "lt1" => (Operator::Lt, &["1"], 1),
        "lt9" => (Operator::Lt, &["9"], 1),
        other => panic!("unknown fixture {other}"),
    };
    Requirement::new(key, op, values).unwrap().with_min_values(flex.then_some(min))
}

fn fixture(name: &str) -> Requirement {
    fixture_on("key", name, false)
}

/// Parses the compact notation used by the golden tables: `Exists`, `DNE`, `In v…`, `NotIn v…`, then optional
/// `>=n`, `<=n`, `mv n`. Builds the internal representation directly, so tables state exact structure.
fn spec(text: &str) -> Requirement {
    let mut tokens = text.split_whitespace().peekable();
    let complement = match tokens.next().unwrap() {
        "Exists" | "NotIn" => true,
        "DNE" | "In" => false,
        other => panic!("bad spec {other}"),
    };
    let mut r = Requirement::exists("key");
    r.complement = complement;
    let mut values = Vec::new();
    while let Some(tok) = tokens.next() {
        if let Some(n) = tok.strip_prefix(">=") {
            r.gte = Some(n.parse().unwrap());
        } else if let Some(n) = tok.strip_prefix("<=") {
            r.lte = Some(n.parse().unwrap());
        } else if tok == "mv" {
            r.min_values = Some(tokens.next().unwrap().parse().unwrap());
        } else {
            values.push(tok);
        }
    }
    r.values = sorted_unique(&values);
    r
}

/// Upstream's "should intersect two requirements without minValues" table: row = existing (receiver), column =
/// incoming, in [`NAMES`] order.
#[rustfmt::skip]
const INTERSECTION: [[&str; 14]; 14] = [
    // columns (incoming): exists dne inA inB inAB notInA in1 in9 in19 notIn12 gt1 gt9 lt1 lt9
    ["Exists",      "DNE", "In A", "In B", "In A B", "NotIn A",     "In 1", "In 9", "In 1 9", "NotIn 1 2",     "Exists >=2",     "Exists >=10", "Exists <=0", "Exists <=8"], // exists
    ["DNE",         "DNE", "DNE",  "DNE",  "DNE",    "DNE",         "DNE",  "DNE",  "DNE",    "DNE",           "DNE",            "DNE",         "DNE",        "DNE"], // dne
    ["In A",        "DNE", "In A", "DNE",  "In A",   "DNE",         "DNE",  "DNE",  "DNE",    "In A",          "DNE",            "DNE",         "DNE",        "DNE"], // inA
    ["In B",        "DNE", "DNE",  "In B", "In B",   "In B",        "DNE",  "DNE",  "DNE",    "In B",          "DNE",            "DNE",         "DNE",        "DNE"], // inB
    ["In A B",      "DNE", "In A", "In B", "In A B", "In B",        "DNE",  "DNE",  "DNE",    "In A B",        "DNE",            "DNE",         "DNE",        "DNE"], // inAB
    ["NotIn A",     "DNE", "DNE",  "In B", "In B",   "NotIn A",     "In 1", "In 9", "In 1 9", "NotIn 1 2 A",   "Exists >=2",     "Exists >=10", "Exists <=0", "Exists <=8"], // notInA
    ["In 1",        "DNE", "DNE",  "DNE",  "DNE",    "In 1",        "In 1", "DNE",  "In 1",   "DNE",           "DNE",            "DNE",         "DNE",        "In 1"], // in1
    ["In 9",        "DNE", "DNE",  "DNE",  "DNE",    "In 9",        "DNE",  "In 9", "In 9",   "In 9",          "In 9",           "DNE",         "DNE",        "DNE"], // in9
    ["In 1 9",      "DNE", "DNE",  "DNE",  "DNE",    "In 1 9",      "In 1", "In 9", "In 1 9", "In 9",          "In 9",           "DNE",         "DNE",        "In 1"], // in19
    ["NotIn 1 2",   "DNE", "In A", "In B", "In A B", "NotIn 1 2 A", "DNE",  "In 9", "In 9",   "NotIn 1 2",     "NotIn 2 >=2",    "Exists >=10", "Exists <=0", "NotIn 1 2 <=8"], // notIn12
    ["Exists >=2",  "DNE", "DNE",  "DNE",  "DNE",    "Exists >=2",  "DNE",  "In 9", "In 9",   "NotIn 2 >=2",   "Exists >=2",     "Exists >=10", "DNE",        "Exists >=2 <=8"], // gt1
    ["Exists >=10", "DNE", "DNE",  "DNE",  "DNE",    "Exists >=10", "DNE",  "DNE",  "DNE",    "Exists >=10",   "Exists >=10",    "Exists >=10", "DNE",        "DNE"], // gt9
    ["Exists <=0",  "DNE", "DNE",  "DNE",  "DNE",    "Exists <=0",  "DNE",  "DNE",  "DNE",    "Exists <=0",    "DNE",            "DNE",         "Exists <=0", "Exists <=0"], // lt1
    ["Exists <=8",  "DNE", "DNE",  "DNE",  "DNE",    "Exists <=8",  "In 1", "DNE",  "In 1",   "NotIn 1 2 <=8", "Exists >=2 <=8", "DNE",         "Exists <=0", "Exists <=8"], // lt9
];

fn flex_min(name: &str) -> i64 {
    fixture_on("key", name, true).min_values.unwrap()
}

#[test]
fn intersection_truth_table_without_min_values() {
    for (i, a) in NAMES.iter().enumerate() {
        for (j, b) in NAMES.iter().enumerate() {
            let got = fixture(a).intersection(&fixture(b));
            assert_eq!(got, spec(INTERSECTION[i][j]), "{a} ∩ {b}");
        }
    }
}

#[test]
fn intersection_truth_table_with_min_values_on_one_side() {
    // upstream "should intersect requirement with minValues with a requirement without": same sets, and the
    // result keeps the flexible side's minValues (also on DoesNotExist results).
    for (i, a) in NAMES.iter().enumerate() {
        for (j, b) in NAMES.iter().enumerate() {
            let want = spec(INTERSECTION[i][j]).with_min_values(Some(flex_min(a)));
            assert_eq!(fixture_on("key", a, true).intersection(&fixture(b)), want, "{a}(flex) ∩ {b}");
            let want = spec(INTERSECTION[i][j]).with_min_values(Some(flex_min(b)));
            assert_eq!(fixture(a).intersection(&fixture_on("key", b, true)), want, "{a} ∩ {b}(flex)");
        }
    }
}

#[test]
fn intersection_truth_table_with_min_values_on_both_sides() {
    for (i, a) in NAMES.iter().enumerate() {
        for (j, b) in NAMES.iter().enumerate() {
            let want = spec(INTERSECTION[i][j]).with_min_values(Some(flex_min(a).max(flex_min(b))));
            let got = fixture_on("key", a, true).intersection(&fixture_on("key", b, true));
            assert_eq!(got, want, "{a}(flex) ∩ {b}(flex)");
        }
    }
    // Spot checks written out in upstream's table.
    let in_ab = fixture_on("key", "inAB", true);
    assert_eq!(in_ab.intersection(&fixture("dne")), spec("DNE mv 2"));
    assert_eq!(in_ab.intersection(&fixture("notInA")), spec("In B mv 2"));
    assert_eq!(fixture_on("key", "exists", true).intersection(&fixture("inAB")), spec("In A B mv 1"));
    assert_eq!(fixture_on("key", "notIn12", true).intersection(&fixture("gt1")), spec("NotIn 2 >=2 mv 2"));
    assert_eq!(
        fixture_on("key", "gt1", true).intersection(&fixture_on("key", "lt9", true)),
        spec("Exists >=2 <=8 mv 1")
    );
}

#[test]
fn intersection_shares_values_when_equal_to_an_input() {
    let zones = Requirement::in_values("key", &["a", "b", "c"]);
    let exists = Requirement::exists("key");
    assert!(Arc::ptr_eq(&exists.intersection(&zones).values, &zones.values));
    assert!(Arc::ptr_eq(&zones.intersection(&exists).values, &zones.values));
    let subset = Requirement::in_values("key", &["b"]);
    assert!(Arc::ptr_eq(&zones.intersection(&subset).values, &subset.values));
    let not_b = Requirement::not_in("key", &["b"]);
    let narrowed = zones.intersection(&not_b);
    assert_eq!(narrowed.values().collect::<Vec<_>>(), vec!["a", "c"]);
    assert!(!Arc::ptr_eq(&narrowed.values, &zones.values));
    let union = not_b.intersection(&Requirement::not_in("key", &["a"]));
    assert_eq!(union.values().collect::<Vec<_>>(), vec!["a", "b"]);
}

#[test]
fn section_1_7_examples() {
    assert_eq!(fixture("notInA").intersection(&fixture("gt1")), fixture("gt1"));
    assert_eq!(fixture("in19").intersection(&fixture("gt1")), fixture("in9"));
    let bounded = fixture("gt1").intersection(&fixture("lt9"));
    assert_eq!(bounded.operator(), Operator::Exists);
    assert_eq!((bounded.gte(), bounded.lte()), (Some(2), Some(8)));
    for n in 2..=8 {
        assert!(bounded.has(&n.to_string()));
    }
    assert!(!bounded.has("1") && !bounded.has("9"));
    assert_eq!(fixture("lt1").intersection(&fixture("gt1")).operator(), Operator::DoesNotExist);
}

/// upstream "Has" table: rows are the values A, B, 1, 2, 9; columns the fixtures.
#[test]
fn has_truth_table() {
    let table: [(&str, [u8; 14]); 5] = [
        ("A", [1, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0]),
        ("B", [1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0]),
        ("1", [1, 0, 0, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0, 1]),
        ("2", [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 1]),
        ("9", [1, 0, 0, 0, 0, 1, 0, 1, 1, 1, 1, 0, 0, 0]),
    ];
    for (value, row) in table {
        for (name, want) in NAMES.iter().zip(row) {
            assert_eq!(fixture(name).has(value), want == 1, "{name}.has({value})");
        }
    }
}

#[test]
fn operator_len_and_string_tables() {
    use Operator::*;
    let max = UNBOUNDED_LEN;
    let table: [(&str, Operator, usize, &str); 14] = [
        ("exists", Exists, max, "key Exists"),
        ("dne", DoesNotExist, 0, "key DoesNotExist"),
        ("inA", In, 1, "key In [A]"),
        ("inB", In, 1, "key In [B]"),
        ("inAB", In, 2, "key In [A B]"),
        ("notInA", NotIn, max - 1, "key NotIn [A]"),
        ("in1", In, 1, "key In [1]"),
        ("in9", In, 1, "key In [9]"),
        ("in19", In, 2, "key In [1 9]"),
        ("notIn12", NotIn, max - 2, "key NotIn [1 2]"),
        ("gt1", Exists, max, "key Exists >=2"),
        ("gt9", Exists, max, "key Exists >=10"),
        ("lt1", Exists, max, "key Exists <=0"),
        ("lt9", Exists, max, "key Exists <=8"),
    ];
    for (name, op, len, text) in table {
        let r = fixture(name);
        assert_eq!(r.operator(), op, "{name}");
        assert_eq!(r.len(), len, "{name}");
        assert_eq!(r.is_empty(), len == 0, "{name}");
        assert_eq!(r.to_string(), text, "{name}");
    }
    assert_eq!(fixture("gt1").intersection(&fixture("lt9")).to_string(), "key Exists >=2 <=8");
    assert_eq!(fixture("gt9").intersection(&fixture("lt1")).to_string(), "key DoesNotExist");
    assert_eq!(fixture("notIn12").intersection(&fixture("gt1")).to_string(), "key NotIn [2] >=2");
    assert_eq!(fixture_on("key", "inAB", true).to_string(), "key In [A B] minValues 2");
    let many = Requirement::new("key", In, &["g", "f", "e", "d", "c", "b", "a"]).unwrap();
    assert_eq!(many.to_string(), "key In [a b c d e and 2 others]");
    let six = Requirement::new("key", NotIn, &["1", "2", "3", "4", "5", "6"]).unwrap();
    assert_eq!(six.to_string(), "key NotIn [1 2 3 4 5 and 1 others]");
}

#[test]
fn node_selector_requirement_conversion_table() {
    use Operator::*;
    let table: [(&str, Operator, &[&str]); 14] = [
        ("exists", Exists, &[]),
        ("dne", DoesNotExist, &[]),
        ("inA", In, &["A"]),
        ("inB", In, &["B"]),
        ("inAB", In, &["A", "B"]),
        ("notInA", NotIn, &["A"]),
        ("in1", In, &["1"]),
        ("in9", In, &["9"]),
        ("in19", In, &["1", "9"]),
        ("notIn12", NotIn, &["1", "2"]),
        ("gt1", Gte, &["2"]),
        ("gt9", Gte, &["10"]),
        ("lt1", Lte, &["0"]),
        ("lt9", Lte, &["8"]),
    ];
    for flex in [false, true] {
        for (name, op, values) in table {
            let r = fixture_on("key", name, flex);
            let want = NodeSelectorRequirementWithMinValues {
                key: "key".into(),
                operator: op,
                values: values.iter().map(|v| v.to_string()).collect(),
                min_values: flex.then(|| flex_min(name)),
            };
            assert_eq!(r.to_node_selector_requirements(), vec![want], "{name} flex={flex}");
        }
    }
    // A set with one key per fixture converts to fourteen entries, sorted by key.
    let set: Requirements = NAMES.iter().map(|n| fixture_on(n, n, false)).collect();
    let items = set.to_node_selector_requirements();
    assert_eq!(items.len(), 14);
    let keys: Vec<&str> = items.iter().map(|i| i.key.as_str()).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    // Both bounds: two entries.
    let mut both = Requirements::new();
    both.add(Requirement::new("cpu", Gte, &["8"]).unwrap());
    both.add(Requirement::new("cpu", Lte, &["8"]).unwrap());
    let items = both.to_node_selector_requirements();
    assert_eq!(
        items,
        vec![
            NodeSelectorRequirementWithMinValues {
                key: "cpu".into(),
                operator: Gte,
                values: vec!["8".into()],
                min_values: None
            },
            NodeSelectorRequirementWithMinValues {
                key: "cpu".into(),
                operator: Lte,
                values: vec!["8".into()],
                min_values: None
            },
        ]
    );
    assert!(both.get("cpu").has("8") && !both.get("cpu").has("7") && !both.get("cpu").has("9"));
}

#[test]
fn requirements_string_is_sorted() {
    let set: Requirements = NAMES
        .iter()
        .map(|n| {
            let key = match *n {
                "dne" => "doesNotExist",
                "gt1" => "greaterThan1",
                "gt9" => "greaterThan9",
                "lt1" => "lessThan1",
                "lt9" => "lessThan9",
                other => other,
            };
            fixture_on(key, n, false)
        })
        .collect();
    assert_eq!(
        set.to_string(),
        "doesNotExist DoesNotExist, exists Exists, greaterThan1 Exists >=2, greaterThan9 Exists >=10, in1 In [1], \
         in19 In [1 9], in9 In [9], inA In [A], inAB In [A B], inB In [B], lessThan1 Exists <=0, \
         lessThan9 Exists <=8, notIn12 NotIn [1 2], notInA NotIn [A]"
    );
    // Restricted keys (hostname) are left out of the rendering.
    let mut with_host = Requirements::new();
    with_host.add(Requirement::in_values("kubernetes.io/hostname", &["n1"]));
    with_host.add(Requirement::in_values("b", &["x"]));
    assert_eq!(with_host.to_string(), "b In [x]");
}

#[test]
fn gte_and_lte_operators() {
    let gte2 = Requirement::new("key", Operator::Gte, &["2"]).unwrap();
    let lte8 = Requirement::new("key", Operator::Lte, &["8"]).unwrap();
    for (v, want) in [("2", true), ("3", true), ("100", true), ("1", false), ("0", false)] {
        assert_eq!(gte2.has(v), want, "gte2 {v}");
    }
    for (v, want) in [("8", true), ("7", true), ("0", true), ("9", false), ("10", false)] {
        assert_eq!(lte8.has(v), want, "lte8 {v}");
    }
    let both = gte2.intersection(&lte8);
    for (v, want) in [("2", true), ("5", true), ("8", true), ("1", false), ("9", false)] {
        assert_eq!(both.has(v), want, "both {v}");
    }
    assert_eq!(gte2, fixture("gt1"));
    assert_eq!(lte8, fixture("lt9"));
    // Redundant bounds collapse to the tighter one.
    let cases = [
        (Operator::Gt, "4", Operator::Gte, "5", Operator::Gte, "5"),
        (Operator::Gt, "5", Operator::Gte, "5", Operator::Gte, "6"),
        (Operator::Gt, "3", Operator::Gte, "6", Operator::Gte, "6"),
        (Operator::Lt, "5", Operator::Lte, "5", Operator::Lte, "4"),
        (Operator::Lt, "9", Operator::Lte, "5", Operator::Lte, "5"),
    ];
    for (op_a, a, op_b, b, want_op, want) in cases {
        let r =
            Requirement::new("key", op_a, &[a]).unwrap().intersection(&Requirement::new("key", op_b, &[b]).unwrap());
        let items = r.to_node_selector_requirements();
        assert_eq!(items.len(), 1);
        assert_eq!(
            (items[0].operator, items[0].values.clone()),
            (want_op, vec![want.to_string()]),
            "{op_a} {a} ∩ {op_b} {b}"
        );
    }
    let gte0 = Requirement::new("key", Operator::Gte, &["0"]).unwrap();
    assert!(gte0.has("0") && !gte0.has("-1"));
    let lte0 = Requirement::new("key", Operator::Lte, &["0"]).unwrap();
    assert!(lte0.has("0") && !lte0.has("1"));
    // Gt MaxInt matches nothing.
    let gt_max = Requirement::new("key", Operator::Gt, &[i64::MAX.to_string()]).unwrap();
    assert_eq!(gt_max.operator(), Operator::DoesNotExist);
    assert_eq!(gt_max.len(), 0);
    // Lt MinInt matches nothing (upstream overflows).
    let lt_min = Requirement::new("key", Operator::Lt, &[i64::MIN.to_string()]).unwrap();
    assert_eq!(lt_min.operator(), Operator::DoesNotExist);
}

#[test]
fn bounds_need_one_integer() {
    for op in [Operator::Gt, Operator::Lt, Operator::Gte, Operator::Lte] {
        for values in [&[][..], &["1", "2"][..], &["a"][..], &[""][..], &["1.5"][..], &[" 1"][..], &["1_000"][..]] {
            let err = Requirement::new("key", op, values).unwrap_err();
            assert!(matches!(err, RequirementError::NeedsOneInteger { .. }), "{op} {values:?}");
        }
        for ok in ["0", "-3", "+7", "007", "9223372036854775807"] {
            assert!(Requirement::new("key", op, &[ok]).is_ok(), "{op} {ok}");
        }
    }
    let err = Requirement::new("key", Operator::Gt, &["a", "b"]).unwrap_err();
    assert_eq!(err.to_string(), "key key: operator Gt needs exactly one integer value, got [a b]");
    // Non-integer values never satisfy bounds; Go's Atoi syntax is accepted.
    let gt1 = fixture("gt1");
    assert!(gt1.has("+5") && gt1.has("007") && !gt1.has("5.0") && !gt1.has(" 5") && !gt1.has(""));
    assert!(!gt1.has("99999999999999999999"));
}

#[test]
fn any_value_is_deterministic_and_allowed() {
    let cases: [(&str, Option<&str>); 14] = [
        ("exists", Some("0")),
        ("dne", None),
        ("inA", Some("A")),
        ("inB", Some("B")),
        ("inAB", Some("A")),
        ("notInA", Some("0")),
        ("in1", Some("1")),
        ("in9", Some("9")),
        ("in19", Some("1")),
        ("notIn12", Some("0")),
        ("gt1", Some("2")),
        ("gt9", Some("10")),
        ("lt1", Some("0")),
        ("lt9", Some("0")),
    ];
    for (name, want) in cases {
        let r = fixture(name);
        assert_eq!(r.any_value().as_deref(), want, "{name}");
        if let Some(v) = r.any_value() {
            assert!(r.has(&v), "{name} any {v}");
        }
    }
    let not_in_012 = Requirement::not_in("key", &["0", "1", "2"]);
    assert_eq!(not_in_012.any_value().as_deref(), Some("3"));
    let gt1_not_2 = fixture("notIn12").intersection(&fixture("gt1"));
    assert_eq!(gt1_not_2.any_value().as_deref(), Some("3"));
    let negative = Requirement::new("key", Operator::Lte, &["-5"]).unwrap();
    assert_eq!(negative.any_value().as_deref(), Some("-5"));
    let negative_excluded = negative.intersection(&Requirement::not_in("key", &["-5", "-6"]));
    assert_eq!(negative_excluded.any_value().as_deref(), Some("-7"));
    let gte_neg = Requirement::new("key", Operator::Gte, &["-3"]).unwrap();
    assert_eq!(gte_neg.any_value().as_deref(), Some("-3"));
    let full = Requirement::new("key", Operator::Gte, &["2"])
        .unwrap()
        .intersection(&Requirement::new("key", Operator::Lte, &["3"]).unwrap())
        .intersection(&Requirement::not_in("key", &["2", "3"]));
    assert_eq!(full.any_value(), None);
    let top = Requirement::new("key", Operator::Gte, &[i64::MAX.to_string()]).unwrap();
    assert_eq!(top.any_value(), Some(i64::MAX.to_string()));
    let top_excluded = top.intersection(&Requirement::not_in("key", &[i64::MAX.to_string()]));
    assert_eq!(top_excluded.any_value(), None);
}

#[test]
fn keys_are_normalized() {
    let aliases = [
        ("failure-domain.beta.kubernetes.io/zone", TOPOLOGY_ZONE),
        ("failure-domain.beta.kubernetes.io/region", TOPOLOGY_REGION),
        ("beta.kubernetes.io/arch", ARCH),
        ("beta.kubernetes.io/os", OS),
        ("beta.kubernetes.io/instance-type", INSTANCE_TYPE),
    ];
    let labels: BTreeMap<String, String> = aliases.iter().map(|(k, _)| (k.to_string(), "test".to_string())).collect();
    let exprs: Vec<core::NodeSelectorRequirement> = aliases
        .iter()
        .map(|(k, _)| core::NodeSelectorRequirement {
            key: k.to_string(),
            operator: "In".into(),
            values: Some(vec!["test".into()]),
        })
        .collect();
    let term = core::NodeSelectorTerm { match_expressions: Some(exprs.clone()), match_fields: None };
    let pod = core::Pod {
        spec: Some(core::PodSpec {
            node_selector: Some(labels.clone()),
            affinity: Some(core::Affinity {
                node_affinity: Some(core::NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(core::NodeSelector {
                        node_selector_terms: vec![term.clone()],
                    }),
                    preferred_during_scheduling_ignored_during_execution: Some(vec![core::PreferredSchedulingTerm {
                        weight: 1,
                        preference: term,
                    }]),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut want: Vec<&str> = aliases.iter().map(|(_, k)| *k).collect();
    want.sort();
    for set in [
        Requirements::from_labels(&labels),
        Requirements::from_k8s_node_selector_requirements(&exprs).unwrap(),
        Requirements::from_pod(&pod).unwrap(),
        Requirements::from_pod_strict(&pod).unwrap(),
    ] {
        assert_eq!(set.keys().collect::<Vec<_>>(), want);
    }
    let mut set = Requirements::new();
    set.add(Requirement::in_values("failure-domain.beta.kubernetes.io/zone", &["test"]));
    assert!(!set.has("failure-domain.beta.kubernetes.io/zone"));
    assert!(set.get(TOPOLOGY_ZONE).has("test"));
}

// -----------------------------------------------------------------------------------------------------------
// Requirements: compatibility tables (upstream requirements_test.go), on the well-known zone key.
// -----------------------------------------------------------------------------------------------------------

const SET_NAMES: [&str; 15] = [
    "unconstrained",
    "exists",
    "dne",
    "inA",
    "inB",
    "inAB",
    "notInA",
    "in1",
    "in9",
    "in19",
    "notIn12",
    "gt1",
    "gt9",
    "lt1",
    "lt9",
];

fn zone_set(name: &str) -> Requirements {
    let mut set = Requirements::new();
    if name != "unconstrained" {
        set.add(fixture_on(TOPOLOGY_ZONE, name, false));
    }
    set
}

/// Row: existing side; column: incoming side; 1 = compatible with AllowUndefinedWellKnownLabels.
const COMPATIBLE_WELL_KNOWN: [[u8; 15]; 15] = [
    [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], // unconstrained
    [1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], // exists
    [1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0], // dne
    [1, 1, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0], // inA
    [1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0], // inB
    [1, 1, 0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 0, 0], // inAB
    [1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], // notInA
    [1, 1, 0, 0, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0, 1], // in1
    [1, 1, 0, 0, 0, 0, 1, 0, 1, 1, 1, 1, 0, 0, 0], // in9
    [1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 1], // in19
    [1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1], // notIn12
    [1, 1, 0, 0, 0, 0, 1, 0, 1, 1, 1, 1, 1, 0, 1], // gt1
    [1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 0, 0], // gt9
    [1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 1, 1], // lt1
    [1, 1, 0, 0, 0, 0, 1, 1, 0, 1, 1, 1, 0, 1, 1], // lt9
];

/// Strict compatibility differs only when the existing side leaves the key undefined.
const STRICT_UNCONSTRAINED_ROW: [u8; 15] = [1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0];

#[test]
fn compatible_truth_table_allowing_undefined_well_known_labels() {
    for (i, existing) in SET_NAMES.iter().enumerate() {
        for (j, incoming) in SET_NAMES.iter().enumerate() {
            let want = COMPATIBLE_WELL_KNOWN[i][j] == 1;
            let (e, inc) = (zone_set(existing), zone_set(incoming));
            assert_eq!(e.compatible(&inc, AllowUndefined::WellKnownLabels).is_ok(), want, "{existing} ⊇ {incoming}");
            assert_eq!(e.is_compatible(&inc, AllowUndefined::WellKnownLabels), want, "{existing} ⊇ {incoming} (bool)");
        }
    }
}

#[test]
fn compatible_truth_table_strict() {
    for (i, existing) in SET_NAMES.iter().enumerate() {
        for (j, incoming) in SET_NAMES.iter().enumerate() {
            let want = if i == 0 { STRICT_UNCONSTRAINED_ROW[j] == 1 } else { COMPATIBLE_WELL_KNOWN[i][j] == 1 };
            let (e, inc) = (zone_set(existing), zone_set(incoming));
            assert_eq!(e.compatible(&inc, AllowUndefined::Nothing).is_ok(), want, "{existing} ⊇ {incoming}");
            assert_eq!(e.is_compatible(&inc, AllowUndefined::Nothing), want, "{existing} ⊇ {incoming} (bool)");
        }
    }
}

#[test]
fn intersects_ignores_one_sided_keys_and_tolerates_not_in_vs_does_not_exist() {
    for existing in SET_NAMES {
        for incoming in SET_NAMES {
            let (e, inc) = (zone_set(existing), zone_set(incoming));
            let single = match (e.get_ref(TOPOLOGY_ZONE), inc.get_ref(TOPOLOGY_ZONE)) {
                (Some(a), Some(b)) => {
                    a.intersects(b)
                        || (is_not_in_or_does_not_exist(a.operator()) && is_not_in_or_does_not_exist(b.operator()))
                }
                _ => true,
            };
            assert_eq!(e.intersects(&inc).is_ok(), single, "{existing} ∩ {incoming}");
            assert_eq!(e.has_intersection(&inc), single, "{existing} ∩ {incoming} (bool)");
        }
    }
}

#[test]
fn error_messages() {
    let unconstrained = Requirements::new();
    let cases = [
        ("zone", r#"label "zone" does not have known values (typo of "topology.kubernetes.io/zone"?)"#),
        ("region", r#"label "region" does not have known values (typo of "topology.kubernetes.io/region"?)"#),
        ("nodepool", r#"label "nodepool" does not have known values (typo of "karpenter.sh/nodepool"?)"#),
        (
            "instance-type",
            r#"label "instance-type" does not have known values (typo of "node.kubernetes.io/instance-type"?)"#,
        ),
        ("arch", r#"label "arch" does not have known values (typo of "kubernetes.io/arch"?)"#),
        (
            "capacity-type",
            r#"label "capacity-type" does not have known values (typo of "karpenter.sh/capacity-type"?)"#,
        ),
        (
            "topology.kubernetesio/zone",
            r#"label "topology.kubernetesio/zone" does not have known values (typo of "topology.kubernetes.io/zone"?)"#,
        ),
        ("node.io/zone", r#"label "node.io/zone" does not have known values (typo of "topology.kubernetes.io/zone"?)"#),
        (
            "topology.kubernetes.io/regio",
            r#"label "topology.kubernetes.io/regio" does not have known values (typo of "topology.kubernetes.io/region"?)"#,
        ),
        (
            "node.kubernetes.io/region",
            r#"label "node.kubernetes.io/region" does not have known values (typo of "topology.kubernetes.io/region"?)"#,
        ),
        (
            "karpenter/nodepool",
            r#"label "karpenter/nodepool" does not have known values (typo of "karpenter.sh/nodepool"?)"#,
        ),
    ];
    for (key, want) in cases {
        let incoming: Requirements = [Requirement::exists(key)].into_iter().collect();
        let err = unconstrained.compatible(&incoming, AllowUndefined::WellKnownLabels).unwrap_err();
        assert_eq!(err.to_string(), want);
        assert_eq!(err.key(), key);
    }
    let incoming: Requirements = [Requirement::exists("deployment")].into_iter().collect();
    let err = unconstrained.compatible(&incoming, AllowUndefined::Nothing).unwrap_err();
    assert_eq!(err.to_string(), r#"label "deployment" does not have known values"#);
    // Without the well-known allow set, hints come only from the existing side's keys.
    let existing: Requirements = [Requirement::in_values("example.com/team", &["a"])].into_iter().collect();
    let incoming: Requirements = [Requirement::exists("team")].into_iter().collect();
    let err = existing.compatible(&incoming, AllowUndefined::Nothing).unwrap_err();
    assert_eq!(err.to_string(), r#"label "team" does not have known values (typo of "example.com/team"?)"#);
    match err {
        IncompatibleReason::UndefinedLabel { incoming, hint, .. } => {
            assert_eq!(incoming.to_string(), "team Exists");
            assert_eq!(hint.as_deref(), Some("example.com/team"));
        }
        other => panic!("unexpected {other:?}"),
    }
    let incoming: Requirements = [Requirement::exists("zone")].into_iter().collect();
    assert_eq!(
        unconstrained.compatible(&incoming, AllowUndefined::Nothing).unwrap_err().to_string(),
        r#"label "zone" does not have known values"#
    );
}

#[test]
fn conflict_messages_name_both_sides_in_key_order() {
    let mut existing = Requirements::new();
    existing.add(Requirement::in_values(TOPOLOGY_ZONE, &["a"]));
    existing.add(Requirement::in_values(ARCH, &["amd64"]));
    existing.add(Requirement::in_values("example.com/team", &["x"]));
    let mut incoming = Requirements::new();
    incoming.add(Requirement::in_values(TOPOLOGY_ZONE, &["b", "c"]));
    incoming.add(Requirement::in_values(ARCH, &["arm64"]));
    incoming.add(Requirement::in_values("example.com/team", &["x"]));
    let err = existing.compatible(&incoming, AllowUndefined::WellKnownLabels).unwrap_err();
    assert_eq!(
        err.to_string(),
        "key kubernetes.io/arch, kubernetes.io/arch In [arm64] not in kubernetes.io/arch In [amd64]; \
         key topology.kubernetes.io/zone, topology.kubernetes.io/zone In [b c] not in topology.kubernetes.io/zone In [a]"
    );
    assert_eq!(err.key(), ARCH);
    match &err {
        IncompatibleReason::Conflicts(c) => {
            assert_eq!(c.len(), 2);
            assert_eq!(c[1].incoming, Requirement::in_values(TOPOLOGY_ZONE, &["b", "c"]));
            assert_eq!(c[1].existing, Requirement::in_values(TOPOLOGY_ZONE, &["a"]));
        }
        other => panic!("unexpected {other:?}"),
    }
    // Symmetric regardless of which side is larger.
    let mut small = Requirements::new();
    small.add(Requirement::in_values(TOPOLOGY_ZONE, &["z"]));
    assert_eq!(existing.intersects(&small).unwrap_err().key(), TOPOLOGY_ZONE);
    assert_eq!(small.intersects(&existing).unwrap_err().key(), TOPOLOGY_ZONE);
}

#[test]
fn compatible_requires_custom_keys_unless_not_in_or_does_not_exist() {
    let node_pool: Requirements = [Requirement::in_values(TOPOLOGY_ZONE, &["a"])].into_iter().collect();
    for (incoming, ok) in [
        (Requirement::in_values("example.com/team", &["x"]), false),
        (Requirement::exists("example.com/team"), false),
        (Requirement::new("example.com/team", Operator::Gt, &["1"]).unwrap(), false),
        (Requirement::not_in("example.com/team", &["x"]), true),
        (Requirement::does_not_exist("example.com/team"), true),
        (Requirement::in_values(ARCH, &["arm64"]), true),
    ] {
        let text = incoming.to_string();
        let pod: Requirements = [incoming].into_iter().collect();
        assert_eq!(node_pool.compatible(&pod, AllowUndefined::WellKnownLabels).is_ok(), ok, "{text}");
    }
    // Existing nodes: well-known keys must be defined too.
    let pod: Requirements = [Requirement::in_values(ARCH, &["arm64"])].into_iter().collect();
    assert!(node_pool.compatible(&pod, AllowUndefined::Nothing).is_err());
}

#[test]
fn add_intersects_and_get_defaults_to_exists() {
    let mut set = Requirements::new();
    assert_eq!(set.get("k"), Requirement::exists("k"));
    assert!(!set.has("k"));
    set.add(Requirement::in_values("k", &["a", "b", "c"]));
    set.add(Requirement::not_in("k", &["b"]));
    set.add(Requirement::in_values("k", &["b", "c", "d"]).with_min_values(Some(1)));
    assert_eq!(set.get("k"), Requirement::in_values("k", &["c"]).with_min_values(Some(1)));
    assert_eq!(set.len(), 1);
    assert!(set.has_min_values());
    let mut other = Requirements::new();
    other.add(Requirement::in_values("k", &["c", "z"]));
    other.add(Requirement::exists("j"));
    set.add_all(&other);
    assert_eq!(set.keys().collect::<Vec<_>>(), vec!["j", "k"]);
    assert_eq!(set.get("k").values().collect::<Vec<_>>(), vec!["c"]);
    assert_eq!(set.remove("j"), Some(Requirement::exists("j")));
    assert_eq!(set.iter().count(), 1);
}

#[test]
fn labels_and_custom_label_resolution() {
    let mut set = Requirements::new();
    set.add(Requirement::in_values(TOPOLOGY_ZONE, &["a"]));
    set.add(Requirement::in_values(ARCH, &["amd64", "arm64"]));
    set.add(Requirement::in_values("kubernetes.io/hostname", &["n1"]));
    set.add(Requirement::in_values("karpenter.sh/registered", &["true"]));
    set.add(Requirement::in_values("example.com/team", &["x"]));
    set.add(Requirement::in_values("example.com/multi", &["q", "p"]));
    set.add(Requirement::exists("example.com/any"));
    set.add(Requirement::new("example.com/gen", Operator::Gt, &["4"]).unwrap());
    set.add(Requirement::not_in("example.com/not", &["0"]));
    set.add(Requirement::does_not_exist("example.com/none"));
    let want: BTreeMap<String, String> = [("example.com/team", "x"), (TOPOLOGY_ZONE, "a")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(set.labels(), want);
    let want: BTreeMap<String, String> = [
        ("example.com/any", "0"),
        ("example.com/gen", "5"),
        ("example.com/multi", "p"),
        ("example.com/not", "1"),
        ("example.com/team", "x"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(set.resolve_custom_labels(), want);
}

fn pod_with(
    node_selector: &[(&str, &str)],
    required: Vec<Vec<core::NodeSelectorRequirement>>,
    preferred: Vec<(i32, Vec<core::NodeSelectorRequirement>)>,
) -> core::Pod {
    let term = |exprs: Vec<core::NodeSelectorRequirement>| core::NodeSelectorTerm {
        match_expressions: Some(exprs),
        match_fields: None,
    };
    core::Pod {
        spec: Some(core::PodSpec {
            node_selector: (!node_selector.is_empty())
                .then(|| node_selector.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            affinity: Some(core::Affinity {
                node_affinity: Some(core::NodeAffinity {
                    required_during_scheduling_ignored_during_execution: (!required.is_empty())
                        .then(|| core::NodeSelector { node_selector_terms: required.into_iter().map(term).collect() }),
                    preferred_during_scheduling_ignored_during_execution: (!preferred.is_empty()).then(|| {
                        preferred
                            .into_iter()
                            .map(|(weight, exprs)| core::PreferredSchedulingTerm { weight, preference: term(exprs) })
                            .collect()
                    }),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn expr(key: &str, op: &str, values: &[&str]) -> core::NodeSelectorRequirement {
    core::NodeSelectorRequirement {
        key: key.into(),
        operator: op.into(),
        values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
    }
}

#[test]
fn pod_requirements() {
    let pod = pod_with(
        &[(ARCH, "amd64")],
        vec![vec![expr(TOPOLOGY_ZONE, "In", &["a", "b"])], vec![expr(TOPOLOGY_ZONE, "In", &["c"])]],
        vec![
            (10, vec![expr("example.com/light", "Exists", &[])]),
            (50, vec![expr(TOPOLOGY_ZONE, "In", &["b", "c"])]),
            (50, vec![expr("example.com/second-heaviest", "Exists", &[])]),
        ],
    );
    let full = Requirements::from_pod(&pod).unwrap();
    assert_eq!(full.keys().collect::<Vec<_>>(), vec![ARCH, TOPOLOGY_ZONE]);
    assert_eq!(full.get(TOPOLOGY_ZONE), Requirement::in_values(TOPOLOGY_ZONE, &["b"]));
    let strict = Requirements::from_pod_strict(&pod).unwrap();
    assert_eq!(strict.get(TOPOLOGY_ZONE), Requirement::in_values(TOPOLOGY_ZONE, &["a", "b"]));
    assert_eq!(strict.get(ARCH), Requirement::in_values(ARCH, &["amd64"]));
    // The preferred term can empty a key; the result is still returned (the scheduler relaxes it).
    let pod = pod_with(
        &[],
        vec![vec![expr(TOPOLOGY_ZONE, "In", &["a"])]],
        vec![(1, vec![expr(TOPOLOGY_ZONE, "In", &["z"])])],
    );
    assert_eq!(Requirements::from_pod(&pod).unwrap().get(TOPOLOGY_ZONE).operator(), Operator::DoesNotExist);
    // Empty pods.
    assert!(Requirements::from_pod(&core::Pod::default()).unwrap().is_empty());
    // Bad operators and bound values are errors.
    let pod = pod_with(&[], vec![vec![expr("k", "Near", &["1"])]], vec![]);
    assert!(matches!(Requirements::from_pod(&pod), Err(RequirementError::UnknownOperator { .. })));
    let pod = pod_with(&[], vec![], vec![(1, vec![expr("k", "Gt", &["x"])])]);
    assert!(matches!(Requirements::from_pod(&pod), Err(RequirementError::NeedsOneInteger { .. })));
    assert!(Requirements::from_pod_strict(&pod).is_ok());
}

#[test]
fn debug_prints_a_map_and_keys_are_shared_or_static() {
    let set: Requirements =
        [Requirement::in_values("example.com/team", &["x"]), Requirement::exists(ARCH)].into_iter().collect();
    assert_eq!(
        format!("{set:?}"),
        "Requirements { map: {\"example.com/team\": Requirement { key: \"example.com/team\", complement: false, \
         values: [\"x\"], gte: None, lte: None, min_values: None }, \"kubernetes.io/arch\": Requirement { key: \
         \"kubernetes.io/arch\", complement: true, values: [], gte: None, lte: None, min_values: None }} }"
    );
    assert!(matches!(Key::new(ARCH), Key::Static(_)));
    assert!(matches!(Key::new(labels::HOSTNAME), Key::Static(_)));
    assert!(matches!(Key::new("example.com/team"), Key::Shared(_)));
    assert_eq!(Key::new(ARCH), Key::Shared(Arc::from(ARCH)));
    let mut set = set;
    assert_eq!(set.remove("example.com/team").map(|r| r.to_string()).as_deref(), Some("example.com/team In [x]"));
    assert_eq!(set.remove("example.com/team"), None);
    assert_eq!(set.keys().collect::<Vec<_>>(), vec![ARCH]);
}

#[test]
fn heaviest_term_tie_break_is_first() {
    let pod = pod_with(
        &[],
        vec![],
        vec![
            (5, vec![expr("a", "Exists", &[])]),
            (7, vec![expr("b", "Exists", &[])]),
            (7, vec![expr("c", "Exists", &[])]),
        ],
    );
    let affinity = pod.spec.as_ref().unwrap().affinity.as_ref().unwrap().node_affinity.as_ref().unwrap();
    let term =
        heaviest_preferred_term(affinity.preferred_during_scheduling_ignored_during_execution.as_deref()).unwrap();
    assert_eq!(term.preference.match_expressions.as_ref().unwrap()[0].key, "b");
    assert!(heaviest_preferred_term(None).is_none());
    assert!(heaviest_preferred_term(Some(&[])).is_none());
}

#[test]
fn node_selector_requirements_round_trip_and_serde() {
    let items = vec![
        NodeSelectorRequirementWithMinValues {
            key: INSTANCE_TYPE.into(),
            operator: Operator::In,
            values: vec!["m5.large".into(), "c5.large".into()],
            min_values: Some(2),
        },
        NodeSelectorRequirementWithMinValues {
            key: "karpenter.k8s.aws/instance-cpu".into(),
            operator: Operator::Gt,
            values: vec!["3".into()],
            min_values: None,
        },
    ];
    let set = Requirements::from_node_selector_requirements(&items).unwrap();
    assert_eq!(set.get(INSTANCE_TYPE).min_values(), Some(2));
    assert_eq!(set.get("karpenter.k8s.aws/instance-cpu").gte(), Some(4));
    let json = serde_json::to_string(&set.to_node_selector_requirements()).unwrap();
    assert_eq!(
        json,
        r#"[{"key":"karpenter.k8s.aws/instance-cpu","operator":"Gte","values":["4"]},{"key":"node.kubernetes.io/instance-type","operator":"In","values":["c5.large","m5.large"],"minValues":2}]"#
    );
    let back: Vec<NodeSelectorRequirementWithMinValues> = serde_json::from_str(&json).unwrap();
    assert_eq!(Requirements::from_node_selector_requirements(&back).unwrap(), set);
    assert!(serde_json::from_str::<NodeSelectorRequirementWithMinValues>(
        r#"{"key":"k","operator":"Exists","extra":1}"#
    )
    .is_err());
    assert!(serde_json::from_str::<NodeSelectorRequirementWithMinValues>(r#"{"key":"k","operator":"Near"}"#).is_err());
    let ok: NodeSelectorRequirementWithMinValues = serde_json::from_str(r#"{"key":"k","operator":"Exists"}"#).unwrap();
    assert!(ok.values.is_empty() && ok.min_values.is_none());
    for op in Operator::ALL {
        assert_eq!(Operator::parse(op.as_str()), Some(op));
        assert_eq!(serde_json::to_string(&op).unwrap(), format!("\"{op}\""));
        assert_eq!(op.as_str().parse::<Operator>().unwrap(), op);
    }
    assert_eq!(Operator::parse("in"), None);
}

// -----------------------------------------------------------------------------------------------------------
// Properties
// -----------------------------------------------------------------------------------------------------------

const POOL: [&str; 10] = ["A", "B", "c", "0", "1", "2", "9", "-3", "007", "12"];

fn arb_requirement() -> impl Strategy<Value = Requirement> {
    let values = proptest::sample::subsequence(POOL.to_vec(), 0..5);
    let bound = prop_oneof![Just(i64::MIN), Just(i64::MAX), -5i64..15];
    (0usize..8, values, bound, proptest::option::of(1i64..4)).prop_map(|(op, values, n, min)| {
        let op = Operator::ALL[op];
        let r = if op.is_bound() {
            Requirement::new("key", op, &[n.to_string()]).unwrap()
        } else {
            Requirement::new("key", op, &values).unwrap()
        };
        r.with_min_values(min)
    })
}

/// Requirements built by intersecting a few random ones, so sets mix exclusions and bounds.
fn arb_composite() -> impl Strategy<Value = Requirement> {
    proptest::collection::vec(arb_requirement(), 1..4)
        .prop_map(|rs| rs.iter().skip(1).fold(rs[0].clone(), |acc, r| acc.intersection(r)))
}

fn arb_value() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(POOL.to_vec()).prop_map(str::to_string),
        (-20i64..20).prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        "[a-z0-9+-]{0,4}",
    ]
}

proptest! {
    #[test]
    fn intersection_commutes(a in arb_composite(), b in arb_composite()) {
        prop_assert_eq!(a.intersection(&b), b.intersection(&a));
    }

    #[test]
    fn intersection_is_associative(a in arb_composite(), b in arb_composite(), c in arb_composite()) {
        prop_assert_eq!(a.intersection(&b).intersection(&c), a.intersection(&b.intersection(&c)));
    }

    #[test]
    fn intersection_is_idempotent(a in arb_composite()) {
        let once = a.intersection(&a);
        prop_assert_eq!(once.intersection(&once), once.clone());
        // Idempotent up to normalisation: exclusions outside the bounds are dropped on the first pass.
        for v in POOL {
            prop_assert_eq!(once.has(v), a.has(v));
        }
    }

    #[test]
    fn has_of_intersection_is_has_of_both(a in arb_composite(), b in arb_composite(), v in arb_value()) {
        prop_assert_eq!(a.intersection(&b).has(&v), a.has(&v) && b.has(&v));
    }

    #[test]
    fn intersects_agrees_with_intersection(a in arb_composite(), b in arb_composite()) {
        prop_assert_eq!(a.intersects(&b), !a.intersection(&b).is_empty());
        prop_assert_eq!(a.intersects(&b), b.intersects(&a));
    }

    #[test]
    fn self_intersects_unless_empty(a in arb_composite()) {
        prop_assert_eq!(a.intersects(&a), !a.is_empty());
        let set: Requirements = [a.clone()].into_iter().collect();
        prop_assert!(set.compatible(&set, AllowUndefined::Nothing).is_ok());
        prop_assert!(set.compatible(&set, AllowUndefined::WellKnownLabels).is_ok());
        prop_assert!(set.is_compatible(&set, AllowUndefined::Nothing));
    }

    #[test]
    fn any_value_is_allowed(a in arb_composite()) {
        if let Some(v) = a.any_value() {
            prop_assert!(a.has(&v), "{} any {}", a, v);
        } else {
            prop_assert!(a.is_empty() || a.gte().is_some() || a.lte().is_some(), "{}", a);
        }
    }

    /// Few incoming keys against a large set (the lookup path of `has_intersection`) agree
    /// with the merge walk of `intersects`.
    #[test]
    fn has_intersection_of_a_few_keys_against_many(
        big in proptest::collection::vec(arb_composite(), 16),
        small in proptest::collection::vec((arb_composite(), 0usize..16), 1..3),
    ) {
        // Well-known (interned) and custom keys alike.
        let key = |i: usize| -> Key {
            Key::from([TOPOLOGY_ZONE, ARCH, OS, INSTANCE_TYPE, TOPOLOGY_REGION, "example.com/a", "example.com/b",
                "example.com/c", "example.com/d", "example.com/e", "example.com/f", "example.com/g",
                "example.com/h", "example.com/i", "example.com/j", "example.com/k"][i])
        };
        let x: Requirements = big.into_iter().enumerate().map(|(i, r)| Requirement { key: key(i), ..r }).collect();
        let y: Requirements = small.into_iter().map(|(r, i)| Requirement { key: key(i), ..r }).collect();
        prop_assert_eq!(x.intersects(&y).is_ok(), x.has_intersection(&y));
    }

    #[test]
    fn bool_and_result_forms_agree(
        a in arb_composite(),
        b in arb_composite(),
        extra in proptest::option::of(arb_composite()),
        keys in (0usize..3, 0usize..3),
    ) {
        // Keys vary so that shared, one-sided and well-known keys all occur.
        let key = |i: usize| -> Key { Key::from(["key", TOPOLOGY_ZONE, "example.com/z"][i]) };
        let mut x = Requirements::new();
        x.add(Requirement { key: key(keys.0), ..a });
        let mut y = Requirements::new();
        y.add(Requirement { key: key(keys.1), ..b });
        if let Some(e) = extra {
            y.add(Requirement { key: "example.com/other".into(), ..e });
        }
        for allow in [AllowUndefined::Nothing, AllowUndefined::WellKnownLabels] {
            prop_assert_eq!(x.compatible(&y, allow).is_ok(), x.is_compatible(&y, allow));
        }
        prop_assert_eq!(x.intersects(&y).is_ok(), x.has_intersection(&y));
    }

    #[test]
    fn collecting_is_adding_in_turn(items in proptest::collection::vec((arb_composite(), 0usize..4), 0..8)) {
        let key = |i: usize| ["key", TOPOLOGY_ZONE, "example.com/z", ARCH][i];
        let items: Vec<Requirement> =
            items.into_iter().map(|(r, k)| Requirement { key: Key::from(key(k)), ..r }).collect();
        let mut added = Requirements::new();
        for r in &items {
            added.add(r.clone());
        }
        let collected: Requirements = items.iter().cloned().collect();
        prop_assert_eq!(&collected, &added);
        prop_assert!(collected.keys().zip(collected.keys().skip(1)).all(|(a, b)| a < b));
        let mut extended = Requirements::new();
        extended.extend(items.iter().cloned());
        prop_assert_eq!(&extended, &added);
        let mut all = Requirements::new();
        all.add_all(&collected);
        prop_assert_eq!(&all, &added);
        for k in 0..4 {
            prop_assert_eq!(added.has(key(k)), items.iter().any(|r| r.key() == key(k)));
        }
    }

    #[test]
    fn serialisation_round_trips_when_lossless(a in arb_composite()) {
        let items = a.to_node_selector_requirements();
        let back = Requirements::from_node_selector_requirements(&items).unwrap();
        let lossy = (a.gte().is_some() || a.lte().is_some()) && a.values().next().is_some();
        if !lossy {
            for v in POOL {
                prop_assert_eq!(back.get("key").has(v), a.has(v));
            }
            prop_assert_eq!(back.get("key"), a);
        }
    }

    #[test]
    fn nothing_panics_on_arbitrary_input(
        key in ".{0,20}",
        op in ".{0,8}",
        values in proptest::collection::vec(".{0,8}", 0..4),
        probe in ".{0,8}",
    ) {
        let parsed = Operator::parse(&op).unwrap_or(Operator::In);
        for op in [parsed, Operator::Gt, Operator::Lt, Operator::Gte, Operator::Lte, Operator::NotIn] {
            if let Ok(r) = Requirement::new(&key, op, &values) {
                let _ = r.has(&probe);
                let _ = r.any_value();
                let _ = r.to_string();
                let _ = r.len();
                let _ = r.to_node_selector_requirements();
                let _ = r.intersection(&Requirement::exists(&key));
            }
        }
        let expr = core::NodeSelectorRequirement { key: key.clone(), operator: op.clone(), values: Some(values.clone()) };
        let _ = Requirements::from_k8s_node_selector_requirements(&[expr]);
        let set: Requirements = [Requirement::in_values(&key, &values)].into_iter().collect();
        let other: Requirements = [Requirement::exists(&probe)].into_iter().collect();
        let _ = set.compatible(&other, AllowUndefined::WellKnownLabels).map_err(|e| e.to_string());
        let _ = other.compatible(&set, AllowUndefined::Nothing).map_err(|e| e.to_string());
        let _ = set.labels();
        let _ = set.resolve_custom_labels();
        let _ = crate::labels::typo_hint(&key, crate::labels::well_known_labels_hint_order().iter().copied());
        let _ = crate::labels::is_restricted_label(&key);
    }
}
