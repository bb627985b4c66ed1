//! The guard's tables: every refused class in each spelling, refused before any
//! connection (the resolver here counts its lookups and never touches a network).

use std::net::IpAddr;
use std::sync::Mutex;

use super::*;

/// Answers from a fixed table and counts the lookups.
struct Table {
    answers: Vec<(&'static str, Vec<&'static str>)>,
    lookups: Mutex<Vec<String>>,
}

impl Resolve for Table {
    fn resolve<'a>(
        &'a self,
        name: &'a str,
        _port: u16,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send + 'a>> {
        self.lookups.lock().unwrap().push(name.to_string());
        let found = self.answers.iter().find(|(n, _)| *n == name).map(|(_, a)| a.clone());
        Box::pin(async move {
            match found {
                Some(a) => Ok(a.iter().map(|s| s.parse().unwrap()).collect()),
                None => Err(std::io::Error::new(std::io::ErrorKind::NotFound, "no such host")),
            }
        })
    }
}

fn guard(rules: Rules, answers: Vec<(&'static str, Vec<&'static str>)>) -> (Egress, Arc<Table>) {
    let t = Arc::new(Table { answers, lookups: Mutex::default() });
    (Egress::new(rules, t.clone()), t)
}

fn check(e: &Egress, authority: &str) -> Result<Target, CheckError> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(e.check(false, authority, &Reach::Public))
}

fn refused(e: &Egress, authority: &str) -> String {
    match check(e, authority) {
        Err(CheckError::Refused(m)) => m,
        other => panic!("{authority} was not refused: {other:?}"),
    }
}

#[test]
fn every_class_is_refused_in_every_spelling() {
    let (e, lookups) = guard(Rules::default(), vec![]);
    let table: &[(&str, &str)] = &[
        ("127.0.0.1", "loopback"),
        ("127.255.1.2", "loopback"),
        ("[::1]", "loopback"),
        ("2130706433", "loopback"),
        ("0177.0.0.1", "loopback"),
        ("0x7f.1", "loopback"),
        ("0x7F000001", "loopback"),
        ("127.1", "loopback"),
        ("127.0.1", "loopback"),
        ("127.0.0.1.", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("0", "unspecified"),
        ("[::]", "unspecified"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("[fc00::1]", "private"),
        ("[fd12:3456::1]", "private"),
        ("169.254.1.1", "link-local"),
        ("[fe80::1]", "link-local"),
        ("100.64.0.1", "CGNAT"),
        ("100.127.255.254", "CGNAT"),
        ("224.0.0.1", "multicast"),
        ("[ff02::1]", "multicast"),
        ("255.255.255.255", "broadcast"),
        ("198.18.0.1", "benchmarking"),
        ("198.19.255.1", "benchmarking"),
        ("192.0.2.1", "documentation"),
        ("198.51.100.7", "documentation"),
        ("203.0.113.9", "documentation"),
        ("[2001:db8::1]", "documentation"),
        ("169.254.169.254", "metadata"),
        ("0xa9fea9fe", "metadata"),
        ("[fd00:ec2::254]", "metadata"),
        ("100.100.100.200", "metadata"),
        ("169.254.170.2", "metadata"),
        ("168.63.129.16", "metadata"),
        ("[fd00:ec2::23]", "metadata"),
        ("240.0.0.1", "reserved"),
        // IPv4 inside IPv6.
        ("[::ffff:127.0.0.1]", "IPv4-mapped"),
        ("[::ffff:7f00:1]", "IPv4-mapped"),
        ("[::ffff:169.254.169.254]", "metadata"),
        ("[::127.0.0.1]", "IPv4-compatible"),
        ("[::10.0.0.1]", "private"),
        ("[64:ff9b::127.0.0.1]", "NAT64"),
        ("[64:ff9b::a9fe:a9fe]", "metadata"),
        ("[2002:7f00:1::]", "6to4"),
        ("[2002:c0a8:101::1]", "private"),
        ("[2001:0:4136:e378:8000:63bf:80ff:fffe]", "Teredo"),
    ];
    for (host, class) in table {
        let m = refused(&e, host);
        assert!(m.starts_with("refused: "), "{host}: {m}");
        assert!(m.contains(class), "{host}: expected {class} in \"{m}\"");
    }
    assert!(lookups.lookups.lock().unwrap().is_empty(), "addresses are never looked up");
}

#[test]
fn public_addresses_pass_and_numbers_that_are_not_addresses_are_refused() {
    let (e, _) = guard(Rules::default(), vec![]);
    for host in
        ["93.184.215.14", "8.8.8.8", "[2606:4700::1111]", "[::ffff:8.8.8.8]", "1.1", "100.128.0.1", "172.32.0.1"]
    {
        assert!(check(&e, host).is_ok(), "{host} should pass");
    }
    for host in ["256.0.0.1", "1.2.3.4.5", "0x1.0x100.1.1", "09.1.1.1", "4294967296", "1.2.3.256"] {
        let m = refused(&e, host);
        assert!(m.contains("neither a valid IPv4 address nor a host name"), "{host}: {m}");
    }
    for host in ["exa mple.com", "-bad.com", "[::1", "a..b", "user@example.com", "exämple.com", "[2606:4700::1111]x:80"]
    {
        assert!(matches!(check(&e, host), Err(CheckError::Refused(_))), "{host} should be refused");
    }
}

#[test]
fn names_are_resolved_once_and_every_answer_is_checked() {
    let (e, t) = guard(
        Rules::default(),
        vec![
            ("example.test", vec!["127.0.0.1"]),
            ("mixed.test", vec!["93.184.215.14", "10.0.0.5"]),
            ("public.test", vec!["93.184.215.14", "2606:4700::1111"]),
            ("mapped.test", vec!["::ffff:169.254.169.254"]),
        ],
    );
    assert_eq!(refused(&e, "example.test"), "refused: example.test resolves to 127.0.0.1, a loopback address");
    assert!(refused(&e, "mixed.test:8080").contains("10.0.0.5, a private address"));
    assert!(refused(&e, "mapped.test").contains("cloud metadata"));
    let ok = check(&e, "public.test:8443").unwrap();
    assert_eq!(ok.addrs, vec!["93.184.215.14:8443".parse().unwrap(), "[2606:4700::1111]:8443".parse().unwrap()]);
    assert_eq!(ok.name(), "public.test");
    assert!(matches!(check(&e, "missing.test"), Err(CheckError::Dns(_))));
    assert_eq!(
        *t.lookups.lock().unwrap(),
        vec!["example.test", "mixed.test", "mapped.test", "public.test", "missing.test"],
        "one lookup per check"
    );
}

#[test]
fn operator_lists_and_private_ranges() {
    let rules = Rules {
        allow_hosts: vec![HostPattern::parse("*.example.com").unwrap(), HostPattern::parse("intranet.corp").unwrap()],
        deny_hosts: vec![HostPattern::parse("bad.example.com").unwrap(), HostPattern::parse("93.184.215.99").unwrap()],
        allow_private: vec!["10.20.0.0/16".parse().unwrap(), "169.254.0.0/16".parse().unwrap()],
        ..Rules::default()
    };
    let (e, _) = guard(
        rules,
        vec![
            ("www.example.com", vec!["93.184.215.14"]),
            ("intranet.corp", vec!["10.20.3.4"]),
            ("other.corp", vec!["10.20.3.4"]),
            ("meta.example.com", vec!["169.254.169.254"]),
            ("ll.example.com", vec!["169.254.3.3"]),
            ("alias.example.com", vec!["93.184.215.99"]),
        ],
    );
    assert!(refused(&e, "alias.example.com").contains("resolves to 93.184.215.99, denied by [web] deny_hosts"));
    assert!(check(&e, "www.example.com").is_ok());
    assert!(check(&e, "intranet.corp").is_ok(), "allow_private opens the intranet range");
    assert!(refused(&e, "bad.example.com").contains("deny_hosts"));
    assert!(refused(&e, "example.com").contains("allow_hosts"), "*.example.com does not cover example.com");
    assert!(refused(&e, "other.corp").contains("allow_hosts"));
    assert!(check(&e, "ll.example.com").is_ok());
    assert!(refused(&e, "meta.example.com").contains("metadata"), "metadata opens only when named exactly");
}

#[test]
fn a_grant_limits_the_hosts() {
    let (e, _) = guard(Rules::default(), vec![("api.example.com", vec!["93.184.215.14"])]);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let only = Reach::Only(vec![HostPattern::parse("api.example.com").unwrap()]);
    assert!(rt.block_on(e.check(true, "api.example.com", &only)).is_ok());
    let m = rt.block_on(e.check(true, "8.8.8.8", &only)).unwrap_err().to_string();
    assert!(m.contains("not among the hosts this plugin is granted (api.example.com)"), "{m}");
    let m = rt.block_on(e.check(true, "api.example.com", &Reach::Nothing)).unwrap_err().to_string();
    assert!(m.contains("no network grant"), "{m}");
    let port = Reach::Only(vec![HostPattern::parse("api.example.com:8443").unwrap()]);
    assert!(rt.block_on(e.check(true, "api.example.com", &port)).is_err(), "443 is not 8443");
    assert!(rt.block_on(e.check(true, "api.example.com:8443", &port)).is_ok());
}

#[test]
fn patterns() {
    let p = HostPattern::parse("*.example.com").unwrap();
    assert!(p.matches(&Host::Name("a.b.example.com".into()), 443));
    assert!(!p.matches(&Host::Name("badexample.com".into()), 443));
    assert!(!p.matches(&Host::Name("example.com".into()), 443));
    let ip = HostPattern::parse("127.0.0.1").unwrap();
    assert!(ip.matches(&parse_host("0x7f.1").unwrap(), 80), "an address matches however it is spelled");
    assert!(HostPattern::parse("*.127.0.0.1").is_err());
    assert!(HostPattern::parse("example.com:99999").is_err());
    assert!(HostPattern::parse("[::1]:8080").unwrap().matches(&Host::Ip("::1".parse().unwrap()), 8080));
}
