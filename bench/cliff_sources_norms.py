"""Backward row kernels the way a Triton LLM-kernel library writes them, for the cliffs
benchmark (issue #23; bench/cliffs_norms.py runs them): one source, run under Kiln as
written and under Triton through bench/common.py's twin (imports rebound). Written here in
the style of Liger-Kernel's kernels, not copied from them: weight gradients go through
per-program fp32 partial sums that the host adds up (`partial.sum(0)`), row pointers are
advanced by their strides in the loop, and the scalars are loop-carried.

    layer_norm_bwd   one program per block of `rows_per_program` rows (grid = the SM count):
                     dx for each row; dW, dB accumulated in fp32 registers over the block and
                     stored to [programs, n_cols] fp32 partials. x, dy, w, mean, rstd in the
                     input dtype (bf16), as the library stores them.
    rms_norm_bwd     the same pattern for RMSNorm (dW partials), Llama casting (x * rstd
                     rounded to the input dtype before it meets dy), weight offset (0 for
                     Llama), fp32 rstd.
    group_norm_bwd   one program per (batch, group) of a [batch, channels, HW] tensor: a first
                     pass over the group's channels gives each channel's dW, dB partial (this
                     batch's share, stored to [batch, channels] fp32) and the two group
                     reductions; a second pass writes dx.
    cross_entropy_fwd_bwd
                     one program per row: an online max / sum-exp over the vocabulary in
                     BLOCK_SIZE chunks, the row's loss, then the gradient
                     (softmax - onehot) / n_non_ignore written in place over the logits; rows
                     whose target is ignore_index get a zero gradient and a zero loss.
"""
import kiln
import kiln.language as tl


@kiln.jit
def layer_norm_bwd(X_ptr, W_ptr, Mean_ptr, RSTD_ptr, DY_ptr, DX_ptr, DW_ptr, DB_ptr,
                   stride_x, stride_dy, stride_dx, stride_dw, stride_db,
                   n_rows, n_cols, rows_per_program, BLOCK_SIZE: tl.constexpr):
    row_block_id = tl.program_id(0)
    row_start = row_block_id * rows_per_program
    row_end = min(row_start + rows_per_program, n_rows)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols

    dw_row = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    db_row = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)

    X_ptr += row_start * stride_x
    DY_ptr += row_start * stride_dy
    DX_ptr += row_start * stride_dx
    Mean_ptr += row_start
    RSTD_ptr += row_start

    w = tl.load(W_ptr + cols, mask=mask, other=0.0).to(tl.float32)

    for _ in range(row_start, row_end):
        x = tl.load(X_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(DY_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.load(Mean_ptr).to(tl.float32)
        rstd = tl.load(RSTD_ptr).to(tl.float32)

        x_hat = (x - mean) * rstd
        wdy = w * dy
        c1 = tl.sum(x_hat * wdy, axis=0) / n_cols
        c2 = tl.sum(wdy, axis=0) / n_cols
        dx = (wdy - (x_hat * c1 + c2)) * rstd
        tl.store(DX_ptr + cols, dx.to(DX_ptr.dtype.element_ty), mask=mask)

        dw_row += dy * x_hat
        db_row += dy

        X_ptr += stride_x
        DY_ptr += stride_dy
        DX_ptr += stride_dx
        Mean_ptr += 1
        RSTD_ptr += 1

    tl.store(DW_ptr + row_block_id * stride_dw + cols, dw_row, mask=mask)
    tl.store(DB_ptr + row_block_id * stride_db + cols, db_row, mask=mask)


@kiln.jit
def rms_norm_bwd(DY_ptr, X_ptr, W_ptr, RSTD_ptr, DX_ptr, DW_ptr,
                 stride_dy, stride_x, stride_dx, stride_dw,
                 n_rows, n_cols, rows_per_program, offset, BLOCK_SIZE: tl.constexpr):
    row_block_id = tl.program_id(0)
    row_start = row_block_id * rows_per_program
    row_end = min((row_block_id + 1) * rows_per_program, n_rows)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x_dtype = X_ptr.dtype.element_ty

    dw_row = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)

    DY_ptr += row_start * stride_dy
    X_ptr += row_start * stride_x
    DX_ptr += row_start * stride_dx

    w = tl.load(W_ptr + cols, mask=mask, other=0.0)
    w = w + offset

    for row_idx in range(row_start, row_end):
        dy = tl.load(DY_ptr + cols, mask=mask, other=0.0)
        x = tl.load(X_ptr + cols, mask=mask, other=0.0)
        rstd = tl.load(RSTD_ptr + row_idx)

        x = x.to(tl.float32)
        m = (dy * w).to(tl.float32)
        dx = rstd * m
        dx += rstd * (-(1 / n_cols) * rstd * rstd * tl.sum(m * x, axis=0) * x)
        tl.store(DX_ptr + cols, dx.to(x_dtype), mask=mask)

        # Llama casting: the normalised row is rounded to the input dtype before the weight
        dw_row += dy * (x * rstd).to(x_dtype)

        DY_ptr += stride_dy
        X_ptr += stride_x
        DX_ptr += stride_dx

    tl.store(DW_ptr + row_block_id * stride_dw + cols, dw_row, mask=mask)


@kiln.jit
def group_norm_bwd(X_ptr, W_ptr, Mean_ptr, RSTD_ptr, DY_ptr, DX_ptr, DW_ptr, DB_ptr,
                   stride_x_batch, stride_x_channel, stride_stat_batch, stride_dw_batch,
                   channels_per_group, hidden_size, BLOCK_SIZE: tl.constexpr):
    batch_idx = tl.program_id(0)
    group_idx = tl.program_id(1)
    first_channel = group_idx * channels_per_group
    n_elems = channels_per_group * hidden_size

    X_ptr += batch_idx * stride_x_batch + first_channel * stride_x_channel
    DY_ptr += batch_idx * stride_x_batch + first_channel * stride_x_channel
    DX_ptr += batch_idx * stride_x_batch + first_channel * stride_x_channel
    DW_ptr += batch_idx * stride_dw_batch
    DB_ptr += batch_idx * stride_dw_batch

    mean = tl.load(Mean_ptr + batch_idx * stride_stat_batch + group_idx).to(tl.float32)
    rstd = tl.load(RSTD_ptr + batch_idx * stride_stat_batch + group_idx).to(tl.float32)
    block = tl.arange(0, BLOCK_SIZE)

    # pass 1: this batch's dW, dB for each channel of the group, and the group's sums
    # c1 = sum(x_hat * w * dy), c2 = sum(w * dy)
    c1 = 0.0
    c2 = 0.0
    for channel_idx in range(first_channel, first_channel + channels_per_group):
        w = tl.load(W_ptr + channel_idx).to(tl.float32)
        dw = 0.0
        db = 0.0
        for i in range(0, hidden_size, BLOCK_SIZE):
            offs = i + block
            mask = offs < hidden_size
            x = tl.load(X_ptr + offs, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(DY_ptr + offs, mask=mask, other=0.0).to(tl.float32)
            x_hat = (x - mean) * rstd
            dw += tl.sum(dy * x_hat)
            db += tl.sum(dy)
        c1 += dw * w
        c2 += db * w
        tl.store(DW_ptr + channel_idx, dw)
        tl.store(DB_ptr + channel_idx, db)
        X_ptr += stride_x_channel
        DY_ptr += stride_x_channel

    c1 = c1 / n_elems
    c2 = c2 / n_elems

    # pass 2: dx = (w * dy - (x_hat * c1 + c2)) * rstd
    X_ptr -= channels_per_group * stride_x_channel
    DY_ptr -= channels_per_group * stride_x_channel
    for channel_idx in range(first_channel, first_channel + channels_per_group):
        w = tl.load(W_ptr + channel_idx).to(tl.float32)
        for i in range(0, hidden_size, BLOCK_SIZE):
            offs = i + block
            mask = offs < hidden_size
            x = tl.load(X_ptr + offs, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(DY_ptr + offs, mask=mask, other=0.0).to(tl.float32)
            x_hat = (x - mean) * rstd
            dx = (w * dy - (x_hat * c1 + c2)) * rstd
            tl.store(DX_ptr + offs, dx.to(DX_ptr.dtype.element_ty), mask=mask)
        X_ptr += stride_x_channel
        DY_ptr += stride_x_channel
        DX_ptr += stride_x_channel


@kiln.jit
def cross_entropy_fwd_bwd(X_ptr, X_stride, Y_ptr, Loss_ptr, n_cols, n_non_ignore,
                          ignore_index, BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)
    X_ptr += program_id * X_stride
    Y_ptr += program_id
    Loss_ptr += program_id

    y = tl.load(Y_ptr)
    if y == ignore_index:
        for i in range(0, n_cols, BLOCK_SIZE):
            X_offsets = i + tl.arange(0, BLOCK_SIZE)
            tl.store(X_ptr + X_offsets, 0.0, mask=X_offsets < n_cols)
        tl.store(Loss_ptr, 0.0)
        return

    # pass 1: online max and sum of exponentials over the vocabulary
    m = float("-inf")
    d = 0.0
    ori_X_y = tl.load(X_ptr + y).cast(tl.float32)
    for i in range(0, n_cols, BLOCK_SIZE):
        X_offsets = i + tl.arange(0, BLOCK_SIZE)
        X_block = tl.load(X_ptr + X_offsets, mask=X_offsets < n_cols,
                          other=float("-inf")).cast(tl.float32)
        block_max = tl.max(X_block)
        m_new = tl.maximum(m, block_max)
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(X_block - m_new))
        m = m_new
    lse = m + tl.log(d)

    # pass 2: the gradient (softmax - onehot) / n_non_ignore, in place over the logits
    for i in range(0, n_cols, BLOCK_SIZE):
        X_offsets = i + tl.arange(0, BLOCK_SIZE)
        X_block = tl.load(X_ptr + X_offsets, mask=X_offsets < n_cols,
                          other=float("-inf")).cast(tl.float32)
        X_block = tl.exp(X_block - m) / d
        X_block = tl.where(X_offsets != y, X_block, X_block - 1.0)
        X_block = X_block / n_non_ignore
        tl.store(X_ptr + X_offsets, X_block.to(X_ptr.dtype.element_ty),
                 mask=X_offsets < n_cols)

    loss = (lse - ori_X_y) / n_non_ignore
    tl.store(Loss_ptr, loss)
