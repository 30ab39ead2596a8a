# Every shader variant compiled into the library: vkasr_shader(NAME SOURCE [DEFINES ...] [REQUIRES ...]).
# NAME becomes SPV_<NAME> in the generated table.
vkasr_shader(unary unary.comp)
