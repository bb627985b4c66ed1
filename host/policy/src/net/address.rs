//! Address classes and host spellings.
//!
//! [`classify`] names the class of an address no tool may reach without the operator's
//! say-so (loopback, private, link-local, CGNAT, metadata…), looking inside the IPv6
//! forms that carry an IPv4 address (mapped, compatible, NAT64, 6to4, Teredo).
//! [`parse_host`] reads a URL's host the way a resolver would: an IPv4 address in any
//! of its legacy spellings (`2130706433`, `0177.0.0.1`, `0x7f.1`, `127.1`) is that
//! address, not a name to look up.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A class of addresses the guard refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    /// 127.0.0.0/8, ::1.
    Loopback,
    /// 0.0.0.0/8, ::.
    Unspecified,
    /// 10/8, 172.16/12, 192.168/16, fc00::/7, fec0::/10, 64:ff9b:1::/48.
    Private,
    /// 169.254/16, fe80::/10.
    LinkLocal,
    /// 100.64/10 (carrier-grade NAT).
    Cgnat,
    /// 224/4, ff00::/8.
    Multicast,
    /// 255.255.255.255.
    Broadcast,
    /// 198.18/15, 2001:2::/48.
    Benchmark,
    /// 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32, 3fff::/20.
    Documentation,
    /// 169.254.169.254, 169.254.170.2, 169.254.170.23, 100.100.100.200, 168.63.129.16,
    /// fd00:ec2::254, fd00:ec2::23.
    Metadata,
    /// 240/4, 192.0.0/24, 192.88.99/24, 100::/64: reserved or special-purpose.
    Reserved,
}

impl AddressClass {
    /// The class as a refusal message names it ("a loopback address").
    pub fn describe(self) -> &'static str {
        match self {
            AddressClass::Loopback => "a loopback address",
            AddressClass::Unspecified => "an unspecified address",
            AddressClass::Private => "a private address",
            AddressClass::LinkLocal => "a link-local address",
            AddressClass::Cgnat => "a carrier-grade NAT (CGNAT) address",
            AddressClass::Multicast => "a multicast address",
            AddressClass::Broadcast => "the broadcast address",
            AddressClass::Benchmark => "a benchmarking address",
            AddressClass::Documentation => "a documentation address",
            AddressClass::Metadata => "a cloud metadata address",
            AddressClass::Reserved => "a reserved address",
        }
    }
}

/// Why an address is refused: its class, and the IPv4 address it carries when the
/// class was found inside an IPv6 form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Classified {
    /// The class.
    pub class: AddressClass,
    /// The IPv6 form and the IPv4 address found in it.
    pub inside: Option<(&'static str, Ipv4Addr)>,
}

/// The class of `ip` when it is one the guard refuses; `None` for a public address.
pub fn classify(ip: IpAddr) -> Option<Classified> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4).map(|class| Classified { class, inside: None }),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], bits: u32) -> bool {
    let mask = if bits == 0 { 0 } else { u32::MAX << (32 - bits) };
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn classify_v4(ip: Ipv4Addr) -> Option<AddressClass> {
    use AddressClass::*;
    // The exact addresses first: they sit inside wider classes.
    const METADATA: &[[u8; 4]] = &[
        [169, 254, 169, 254], // AWS, GCP, Azure, OpenStack…
        [169, 254, 170, 2],   // AWS ECS task credentials
        [169, 254, 170, 23],  // AWS EKS pod identity
        [100, 100, 100, 200], // Alibaba Cloud
        [168, 63, 129, 16],   // Azure WireServer (in a public range)
    ];
    if METADATA.iter().any(|m| ip == Ipv4Addr::from(*m)) {
        return Some(Metadata);
    }
    if ip == Ipv4Addr::BROADCAST {
        return Some(Broadcast);
    }
    const TABLE: &[([u8; 4], u32, AddressClass)] = &[
        ([0, 0, 0, 0], 8, Unspecified),
        ([10, 0, 0, 0], 8, Private),
        ([100, 64, 0, 0], 10, Cgnat),
        ([127, 0, 0, 0], 8, Loopback),
        ([169, 254, 0, 0], 16, LinkLocal),
        ([172, 16, 0, 0], 12, Private),
        ([192, 0, 0, 0], 24, Reserved),
        ([192, 0, 2, 0], 24, Documentation),
        ([192, 88, 99, 0], 24, Reserved),
        ([192, 168, 0, 0], 16, Private),
        ([198, 18, 0, 0], 15, Benchmark),
        ([198, 51, 100, 0], 24, Documentation),
        ([203, 0, 113, 0], 24, Documentation),
        ([224, 0, 0, 0], 4, Multicast),
        ([240, 0, 0, 0], 4, Reserved),
    ];
    TABLE.iter().find(|(net, bits, _)| in_v4(ip, *net, *bits)).map(|(_, _, c)| *c)
}

fn in_v6(ip: Ipv6Addr, net: [u16; 8], bits: u32) -> bool {
    let mask = if bits == 0 { 0 } else { u128::MAX << (128 - bits) };
    u128::from(ip) & mask == u128::from(Ipv6Addr::from(net)) & mask
}

fn low_v4(ip: Ipv6Addr) -> Ipv4Addr {
    Ipv4Addr::from((u128::from(ip) & 0xffff_ffff) as u32)
}

fn classify_v6(ip: Ipv6Addr) -> Option<Classified> {
    use AddressClass::*;
    let plain = |class| Some(Classified { class, inside: None });
    if ip == Ipv6Addr::UNSPECIFIED {
        return plain(Unspecified);
    }
    if ip == Ipv6Addr::LOCALHOST {
        return plain(Loopback);
    }
    if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)
        || ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23)
    {
        return plain(Metadata);
    }
    // Forms that carry an IPv4 address: the IPv4 address decides.
    let seg = ip.segments();
    let embedded: Option<(&'static str, Ipv4Addr)> = if in_v6(ip, [0, 0, 0, 0, 0, 0xffff, 0, 0], 96) {
        Some(("an IPv4-mapped IPv6 address", low_v4(ip)))
    } else if in_v6(ip, [0; 8], 96) {
        Some(("an IPv4-compatible IPv6 address", low_v4(ip)))
    } else if in_v6(ip, [0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96) {
        Some(("a NAT64 address", low_v4(ip)))
    } else if in_v6(ip, [0x2002, 0, 0, 0, 0, 0, 0, 0], 16) {
        Some(("a 6to4 address", Ipv4Addr::from(((seg[1] as u32) << 16) | seg[2] as u32)))
    } else if in_v6(ip, [0x2001, 0, 0, 0, 0, 0, 0, 0], 32) {
        // Teredo: the client's address is the last 32 bits, inverted.
        Some(("a Teredo address", Ipv4Addr::from(!((u128::from(ip) & 0xffff_ffff) as u32))))
    } else {
        None
    };
    if let Some((form, v4)) = embedded {
        return classify_v4(v4).map(|class| Classified { class, inside: Some((form, v4)) });
    }
    const TABLE: &[([u16; 8], u32, AddressClass)] = &[
        ([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48, Private),
        ([0x100, 0, 0, 0, 0, 0, 0, 0], 64, Reserved),
        ([0x2001, 2, 0, 0, 0, 0, 0, 0], 48, Benchmark),
        ([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32, Documentation),
        ([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, Documentation),
        ([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, Private),
        ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, LinkLocal),
        ([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, Private),
        ([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, Multicast),
    ];
    TABLE.iter().find(|(net, bits, _)| in_v6(ip, *net, *bits)).and_then(|(_, _, c)| plain(*c))
}

/// A URL's host, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// An address, however it was spelled.
    Ip(IpAddr),
    /// A name to resolve: lower case, without a trailing dot.
    Name(String),
}

impl std::fmt::Display for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Host::Ip(ip) => ip.fmt(f),
            Host::Name(n) => f.write_str(n),
        }
    }
}

/// Why a host cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AddressError {
    /// Nothing where the host should be.
    #[error("the URL has no host")]
    NoHost,
    /// Brackets around something that is not an IPv6 address.
    #[error("\"{0}\" is not a valid IPv6 address")]
    Ipv6(String),
    /// Numbers that are not an IPv4 address (refused rather than guessed at).
    #[error("\"{0}\" is neither a valid IPv4 address nor a host name")]
    Ipv4(String),
    /// Not a DNS name of letters, digits, hyphens and dots.
    #[error("\"{0}\" is not a valid host name")]
    Name(String),
}

/// Read a host as a resolver would. IPv6 in brackets; IPv4 in dotted, shortened,
/// decimal, octal or hexadecimal parts; anything else a DNS name of letters, digits,
/// hyphens and dots (international names arrive in their `xn--` form).
pub fn parse_host(raw: &str) -> Result<Host, AddressError> {
    if let Some(inner) = raw.strip_prefix('[') {
        let inner = inner.strip_suffix(']').ok_or_else(|| AddressError::Ipv6(raw.to_string()))?;
        return inner
            .parse::<Ipv6Addr>()
            .map(|v6| Host::Ip(IpAddr::V6(v6)))
            .map_err(|_| AddressError::Ipv6(raw.to_string()));
    }
    if let Ok(v6) = raw.parse::<Ipv6Addr>() {
        return Ok(Host::Ip(IpAddr::V6(v6)));
    }
    let name = raw.strip_suffix('.').unwrap_or(raw).to_ascii_lowercase();
    if name.is_empty() {
        return Err(AddressError::NoHost);
    }
    if let Some(v4) = legacy_ipv4(&name)? {
        return Ok(Host::Ip(IpAddr::V4(v4)));
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if name.len() > 253 || !name.split('.').all(label_ok) {
        return Err(AddressError::Name(raw.to_string()));
    }
    Ok(Host::Name(name))
}

/// One part of an IPv4 address in C's `inet_aton` notation: `0x` hex, leading-zero
/// octal, or decimal. `None` when the part is not a number at all.
fn ipv4_part(p: &str) -> Option<Option<u64>> {
    let (digits, radix) = if let Some(h) = p.strip_prefix("0x") {
        (h, 16)
    } else if p.len() > 1 && p.starts_with('0') {
        (&p[1..], 8)
    } else {
        (p, 10)
    };
    if digits.is_empty() {
        // "0x" alone is zero, as resolvers read it.
        return if radix == 16 { Some(Some(0)) } else { None };
    }
    if !digits.chars().all(|c| c.is_digit(radix)) {
        return if p.chars().all(|c| c.is_ascii_digit()) { Some(None) } else { None };
    }
    Some(u64::from_str_radix(digits, radix).ok())
}

/// The IPv4 address a host written as numbers stands for; `Ok(None)` for a name.
/// A host whose last label is a number but which is not a valid address is refused,
/// as browsers refuse it, rather than passed to a resolver to guess at.
fn legacy_ipv4(name: &str) -> Result<Option<Ipv4Addr>, AddressError> {
    let parts: Vec<&str> = name.split('.').collect();
    let last = parts.last().copied().unwrap_or_default();
    if ipv4_part(last).is_none() {
        return Ok(None);
    }
    let invalid = || AddressError::Ipv4(name.to_string());
    if parts.len() > 4 {
        return Err(invalid());
    }
    let mut nums = Vec::with_capacity(parts.len());
    for p in &parts {
        match ipv4_part(p) {
            Some(Some(n)) => nums.push(n),
            _ => return Err(invalid()),
        }
    }
    let (head, tail) = nums.split_at(nums.len() - 1);
    if head.iter().any(|&n| n > 255) {
        return Err(invalid());
    }
    let tail_bits = 8 * (5 - nums.len()) as u32;
    if tail[0] >= 1u64 << tail_bits {
        return Err(invalid());
    }
    let mut v: u64 = tail[0];
    for (i, n) in head.iter().enumerate() {
        v |= n << (24 - 8 * i as u32);
    }
    Ok(Some(Ipv4Addr::from(v as u32)))
}
