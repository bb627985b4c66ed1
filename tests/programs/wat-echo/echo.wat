;; A Cheng tool component written by hand in the WebAssembly text format — no Rust, no
;; SDK, no bindings generator — to show that the `tool` world (wit/world.wit) is a
;; language-neutral contract. One tool, `wat_echo`, answers {"success":true,"echo":INPUT}.
;;
;; The core module implements the canonical ABI directly: `describe` returns a pointer to
;; a static list of one tool-spec record laid out in a data segment; `call` receives the
;; tool name, the input and the call context flattened into 16 i32 parameters and writes
;; its result<string, failure> into a return area. `cabi_realloc` is a bump allocator.
(component
  (core module $m
    (memory (export "memory") 1)
    (global $heap (mut i32) (i32.const 0x1000))

    ;; Bump allocator; grows memory when needed. (old-ptr old-size align new-size)
    (func $realloc (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
      (local $p i32) (local $end i32)
      (local.set $p
        (i32.and
          (i32.add (global.get $heap) (i32.sub (local.get 2) (i32.const 1)))
          (i32.sub (i32.const 0) (local.get 2))))
      (local.set $end (i32.add (local.get $p) (local.get 3)))
      (if (i32.gt_u (local.get $end) (i32.mul (memory.size) (i32.const 65536)))
        (then
          (if (i32.eq
                (memory.grow (i32.add (i32.shr_u (i32.sub (local.get $end) (i32.mul (memory.size) (i32.const 65536))) (i32.const 16)) (i32.const 1)))
                (i32.const -1))
            (then unreachable))))
      (global.set $heap (local.get $end))
      (local.get $p))

    ;; Static data: the strings, the tool-spec record, describe's return area.
    (data (i32.const 256) "wat_echo")
    (data (i32.const 288) "Echoes its input back inside {\22echo\22: ...}; written in WebAssembly text, not Rust.")
    (data (i32.const 512) "{\22type\22:\22object\22,\22properties\22:{\22text\22:{\22type\22:\22string\22}},\22required\22:[\22text\22],\22additionalProperties\22:false}")
    (data (i32.const 768) "{\22type\22:\22object\22,\22properties\22:{\22success\22:{\22type\22:\22boolean\22},\22echo\22:{\22type\22:\22object\22}},\22required\22:[\22success\22,\22echo\22]}")
    (data (i32.const 1024) "{\22success\22:true,\22echo\22:")
    (data (i32.const 1152) "unknown tool: this component serves wat_echo")
    (data (i32.const 0x800) "\00\01\00\00\08\00\00\00 \01\00\00R\00\00\00\00\02\00\00j\00\00\00\00\03\00\00t\00\00\00\00\00\00\00\00\00\00\00\00\00\00\00")
    (data (i32.const 0x900) "\00\08\00\00\01\00\00\00")

    (func (export "describe") (result i32) (i32.const 0x900))

    ;; call(tool-ptr tool-len input-ptr input-len ctx: 6 × (ptr len)) -> return area
    (func (export "call")
      (param $tp i32) (param $tl i32) (param $ip i32) (param $il i32)
      (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32)
      (result i32)
      (local $i i32) (local $out i32) (local $ok i32)
      ;; Is the tool "wat_echo"?
      (local.set $ok (i32.eq (local.get $tl) (i32.const 8)))
      (if (local.get $ok)
        (then
          (block $done
            (loop $cmp
              (br_if $done (i32.ge_u (local.get $i) (i32.const 8)))
              (if (i32.ne (i32.load8_u (i32.add (local.get $tp) (local.get $i)))
                          (i32.load8_u (i32.add (i32.const 256) (local.get $i))))
                (then (local.set $ok (i32.const 0)) (br $done)))
              (local.set $i (i32.add (local.get $i) (i32.const 1)))
              (br $cmp)))))
      (if (i32.eqz (local.get $ok))
        (then
          ;; err(failure { kind: invalid-argument, message, terminal: true })
          (i32.store8 (i32.const 0xA00) (i32.const 1))
          (i32.store8 (i32.const 0xA04) (i32.const 0))
          (i32.store (i32.const 0xA08) (i32.const 1152))
          (i32.store (i32.const 0xA0C) (i32.const 44))
          (i32.store8 (i32.const 0xA10) (i32.const 1))
          (return (i32.const 0xA00))))
      ;; ok(PREFIX ++ input ++ "}")
      (local.set $out (call $realloc (i32.const 0) (i32.const 0) (i32.const 1)
        (i32.add (local.get $il) (i32.const 24))))
      (memory.copy (local.get $out) (i32.const 1024) (i32.const 23))
      (memory.copy (i32.add (local.get $out) (i32.const 23)) (local.get $ip) (local.get $il))
      (i32.store8 (i32.add (i32.add (local.get $out) (i32.const 23)) (local.get $il)) (i32.const 0x7d))
      (i32.store8 (i32.const 0xA00) (i32.const 0))
      (i32.store (i32.const 0xA04) (local.get $out))
      (i32.store (i32.const 0xA08) (i32.add (local.get $il) (i32.const 24)))
      (i32.const 0xA00))
  )
  (core instance $i (instantiate $m))

  ;; The world's types, structurally as in wit/types.wit.
  (type $fs-access' (enum "none" "read" "write"))
  (export $fs-access "fs-access" (type $fs-access'))
  (type $needs' (record (field "fs" $fs-access) (field "spawn" bool) (field "network" (list string))))
  (export $needs "needs" (type $needs'))
  (type $tool-spec' (record
    (field "name" string) (field "description" string)
    (field "input-schema" string) (field "output-schema" string)
    (field "needs" $needs)))
  (export $tool-spec "tool-spec" (type $tool-spec'))
  (type $error-kind' (enum "invalid-argument" "path-refused" "not-found" "not-granted" "approval-denied"
    "command-not-allowed" "shell-syntax-disabled" "spawn-failed" "timeout" "cancelled"
    "output-limit" "io" "crashed" "binary-file" "too-large"))
  (export $error-kind "error-kind" (type $error-kind'))
  (type $failure' (record (field "kind" $error-kind) (field "message" string) (field "terminal" bool)))
  (export $failure "failure" (type $failure'))
  (type $call-context' (record
    (field "sandbox-root" string) (field "guest-root" string) (field "run-id" string)
    (field "role" string) (field "call-id" string) (field "protected" (list string))))
  (export $call-context "call-context" (type $call-context'))

  (func $describe (result (list $tool-spec))
    (canon lift (core func $i "describe") (memory (core memory $i "memory")) (realloc (core func $i "cabi_realloc"))))
  (func $call (param "tool" string) (param "input" string) (param "ctx" $call-context)
    (result (result string (error $failure)))
    (canon lift (core func $i "call") (memory (core memory $i "memory")) (realloc (core func $i "cabi_realloc"))))
  (export "describe" (func $describe))
  (export "call" (func $call))
)
