# A host-side check of the bf16 mLSTM outputs kernel's fragment addressing
# (src/backend/cuda/mlstm_prefill_bf16.cu): every ldmatrix the kernel issues is emulated on
# labelled shared-memory arrays, its registers read back as the mma.m16n8k16 operands they
# become, and compared with the sub-matrices the math names (q̂ and C_c, q̂ and Kᵀ, S' and V);
# each 8-row phase of each ldmatrix must also fall in 8 distinct 16-byte bank groups.
# Run: python3 tools/cuda/check_bf16_fragments.py
L, STAGE = 64, 32


def ldmatrix(array, pitch, lane_address, trans):
    """array: dict (row, col) -> label; lane_address(l) -> (row, col) of lane l's 8-element row.
    Returns regs[lane][i] = (low, high) and the byte addresses each matrix's rows start at."""
    regs = [[None] * 4 for _ in range(32)]
    starts = [[] for _ in range(4)]
    for i in range(4):
        matrix = []
        for r in range(8):
            row, col = lane_address(8 * i + r)
            matrix.append([array[(row, col + e)] for e in range(8)])
            starts[i].append(2 * (row * pitch + col))
        for lane in range(32):
            g, t = lane // 4, lane % 4
            if trans:
                regs[lane][i] = (matrix[2 * t][g], matrix[2 * t + 1][g])
            else:
                regs[lane][i] = (matrix[g][2 * t], matrix[g][2 * t + 1])
    for i in range(4):
        assert len({(s // 16) % 8 for s in starts[i]}) == 8, ("bank conflict", starts[i])
        assert all(s % 16 == 0 for s in starts[i]), "ldmatrix rows are 16-byte aligned"
    return regs


def a_operand(regs):  # A (16 × 16) as mma.m16n8k16 reads registers 0 … 3
    A = {}
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for e in range(2):
            A[(g, 2 * t + e)] = regs[lane][0][e]
            A[(g + 8, 2 * t + e)] = regs[lane][1][e]
            A[(g, 2 * t + 8 + e)] = regs[lane][2][e]
            A[(g + 8, 2 * t + 8 + e)] = regs[lane][3][e]
    return A


def b_operand(regs, first):  # B (16 × 8) from registers first, first + 1
    B = {}
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for e in range(2):
            B[(2 * t + e, g)] = regs[lane][first][e]
            B[(2 * t + 8 + e, g)] = regs[lane][first + 1][e]
    return B


def lane_offsets(lane):  # as the kernel computes them
    a = (lane % 16, 8 * (lane // 16))
    trans = (lane % 8 + 8 * (lane // 8 % 2), 8 * (lane // 16))
    plain = (lane % 8 + 8 * (lane // 16), 8 * (lane // 8 % 2))
    return a, trans, plain


checked = 0
for d in (32, 64, 96, 128):
    key_pitch = value_pitch = state_pitch = d + 8
    query_pitch, score_pitch = STAGE + 8, L + 8
    q = {(r, c): ("q", r, c) for r in range(L) for c in range(query_pitch)}      # one stage
    keys = {(r, c): ("k", r, c) for r in range(L) for c in range(key_pitch)}
    values = {(r, c): ("v", r, c) for r in range(L) for c in range(value_pitch)}
    states = {(r, c): ("C", r, c) for r in range(d) for c in range(state_pitch)}
    scores = {(r, c): ("S", r, c) for r in range(L) for c in range(score_pitch)}
    value_pairs = d // 16
    for row_tile in range(L // 16):
        for step in range(STAGE // 16):
            regs = ldmatrix(q, query_pitch, lambda l: (16 * row_tile + lane_offsets(l)[0][0],
                                                      16 * step + lane_offsets(l)[0][1]), False)
            A = a_operand(regs)
            assert all(A[(i, j)] == ("q", 16 * row_tile + i, 16 * step + j) for i in range(16) for j in range(16))
            checked += 1
        for step in range(L // 16):
            A = a_operand(ldmatrix(scores, score_pitch, lambda l: (16 * row_tile + lane_offsets(l)[0][0],
                                                                  16 * step + lane_offsets(l)[0][1]), False))
            assert all(A[(i, j)] == ("S", 16 * row_tile + i, 16 * step + j) for i in range(16) for j in range(16))
            checked += 1
    for column in range(0, d, 16):  # a k-step of q·[C_c | Kᵀ]: rows column … of C_c, columns column … of k
        for pair in range(value_pairs):
            regs = ldmatrix(states, state_pitch, lambda l: (column + lane_offsets(l)[1][0],
                                                            16 * pair + lane_offsets(l)[1][1]), True)
            for half in range(2):
                B = b_operand(regs, 2 * half)
                assert all(B[(k, n)] == ("C", column + k, 16 * pair + 8 * half + n) for k in range(16) for n in range(8))
            checked += 1
        for key_pair in range(L // 16):
            regs = ldmatrix(keys, key_pitch, lambda l: (16 * key_pair + lane_offsets(l)[2][0],
                                                        column + lane_offsets(l)[2][1]), False)
            for half in range(2):
                B = b_operand(regs, 2 * half)  # B[a][j] = k_j[a]
                assert all(B[(k, n)] == ("k", 16 * key_pair + 8 * half + n, column + k) for k in range(16) for n in range(8))
            checked += 1
    for step in range(L // 16):  # S'·V
        for pair in range(value_pairs):
            regs = ldmatrix(values, value_pitch, lambda l: (16 * step + lane_offsets(l)[1][0],
                                                            16 * pair + lane_offsets(l)[1][1]), True)
            for half in range(2):
                B = b_operand(regs, 2 * half)
                assert all(B[(k, n)] == ("v", 16 * step + k, 16 * pair + 8 * half + n) for k in range(16) for n in range(8))
            checked += 1
print("bf16 outputs kernel: %d ldmatrix fragments checked, all as the math names them, no bank conflicts" % checked)

# The warp tiling (kernel: 12 warps, warp_row = warp % 2, warp_column = warp / 2, m-tiles r and
# 3 − r, pairs column and column + 6): every (m-tile, pair) of [h | S] has exactly one owner; S' is
# written for every (m-tile, key block) that S'·V reads (key block ≤ m-tile), and never read unwritten.
WARPS, WARP_COLUMNS, PAIRS_PER_WARP = 12, 6, 2
for d in (32, 64, 96, 128):
    value_pairs, all_pairs = d // 16, d // 16 + L // 16
    assert all_pairs <= WARP_COLUMNS * PAIRS_PER_WARP
    owners, written, read = {}, set(), set()
    for warp in range(WARPS):
        warp_row, warp_column = warp % 2, warp // 2
        for row_tile in (warp_row, 3 - warp_row):
            for i in range(PAIRS_PER_WARP):
                pair = warp_column + i * WARP_COLUMNS
                if pair >= all_pairs:
                    continue
                owners[(row_tile, pair)] = owners.get((row_tile, pair), 0) + 1
                if pair >= value_pairs and pair - value_pairs <= row_tile:  # not above the diagonal
                    written.add((row_tile, pair - value_pairs))
                if pair < value_pairs:
                    read.update((row_tile, step) for step in range(L // 16) if step <= row_tile)
    assert owners == {(r, p): 1 for r in range(L // 16) for p in range(all_pairs)}, ("tiling", d)
    assert read <= written, ("S' read before it is written", d, sorted(read - written))
print("bf16 outputs kernel: the warp tiling owns every tile once and writes every S' block it reads")
