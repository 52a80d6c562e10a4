# Sourced by pack_trial.sh, which names a trial's bundle, and trial_on_device.sh, which reads it:
# one rule for both. A trial's NAME names its bundle (GPU_DIR/NAME.tar.xz) and its build in the
# A/B (ab_bench.sh refuses dots there), and "main" is the build it is compared with.
# refuse_bad_trial_name SCRIPT NAME: exits 2, naming SCRIPT and NAME, unless NAME is letters,
# digits, '_' and '-' and not "main".
refuse_bad_trial_name() {
  if [[ ! "$2" =~ ^[A-Za-z0-9_-]+$ ]] || [ "$2" = main ]; then
    echo "$1: NAME '$2' must be letters, digits, '_' or '-', and not 'main'" >&2
    exit 2
  fi
}
