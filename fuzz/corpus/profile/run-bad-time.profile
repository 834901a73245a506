remat-profile 3
measured 0
cpu AMD EPYC
threads 1
config 2 32 2 256 8 2 8 0.100000001 0 0 0
update 0.0353588672
cache 0
fwd ln1_stat 0.000120061523
fwdhot ln1_stat 0.000120061523
fwd ln1 0.000160082031
fwdhot ln1 0.000160082031
bwd ln1 0.000400205078
bwdhot ln1 0.000400205078
fwd qkv 0.003105
fwdhot qkv 0.003105
bwd qkv 0.00381390625
bwdhot qkv 0.00381390625
fwd att 0.00177158092
fwdhot att 0.00177158092
fwd atty 0.00171530208
fwdhot atty 0.00171530208
bwd atty 0.00719997439
bwdhot atty 0.00719997439
fwd res2 0.00173060417
fwdhot res2 0.00173060417
bwd res2 0.00239230208
bwdhot res2 0.00239230208
fwd ln2_stat 0.000120061523
fwdhot ln2_stat 0.000120061523
fwd ln2 0.000160082031
fwdhot ln2 0.000160082031
bwd ln2 0.000400205078
bwdhot ln2 0.000400205078
fwd fch 0.002454
fwdhot fch 0.002454
bwd fch 0.00444320833
bwdhot fch 0.00444320833
fwd fch_gelu 0.00128065625
fwdhot fch_gelu 0.00128065625
bwd fch_gelu 0.00192098438
bwdhot fch_gelu 0.00192098438
fwd res3 0.003655
fwdhot res3 0.003655
bwd res3 0.00452730208
bwdhot res3 0.00452730208
fwd emb 5.93020833e-05
fwdhot emb 5.93020833e-05
bwd emb 0.000118604167
bwdhot emb 0.000118604167
fwd lnf_stat 0.000120061523
fwdhot lnf_stat 0.000120061523
fwd lnf 0.000160082031
fwdhot lnf 0.000160082031
bwd lnf 0.000400205078
bwdhot lnf 0.000400205078
fwd logits 0.00634465365
fwdhot logits 0.00634465365
bwd logits 0.00664
bwdhot logits 0.00664
run forward ln1_stat 0.002223 4
run forward ln1 0.0018125 4
run forward qkv 0.005668 4
run forward att 0.005353 4
run forward atty 0.00681 4
run forward res2 0.0064945 4
run forward ln2_stat 0.002184 4
run forward ln2 0.001863 4
run forward fch 0.012113 4
run forward fch_gelu 0.003435 4
run forward res3 0.01344 4
run forward emb 0.004277 2
run forward lnf_stat 0.002163 2
run forward lnf 0.0019775 2
run forward logits 0.025788 2
run recompute ln1_stat 0.002148 4
run recompute ln1 0.001858 4
run recompute qkv 1e400 3
run recompute att 0.0052525 4
run recompute atty 0.0064445 4
run recompute res2 0.0059985 4
run recompute ln2_stat 0.002223 4
run recompute ln2 0.001858 4
run recompute fch 0.004361 4
run recompute fch_gelu 0.003295 4
run backward ln1 0.002669 4
run backward qkv 0.0058635 4
run backward atty 0.0173005 4
run backward res2 0.0071705 4
run backward ln2 0.0024085 4
run backward fch 0.0062495 4
run backward fch_gelu 0.003901 4
run backward res3 0.01008 4
run backward emb 0.002033 2
run backward lnf 0.0030445 2
run backward logits 0.009254 2
run free ln1_stat 0.0008565 8
run free ln1 0.0008615 8
run free qkv 0.000871 8
run free att 0.0008215 8
run free atty 0.000866 8
run free res2 0.0008615 8
run free ln2_stat 0.0008365 8
run free ln2 0.000776 8
run free fch 0.000786 8
run free fch_gelu 0.000816 8
run free res3 0.000746 4
run free emb 0.000786 2
run free lnf_stat 0.0008265 2
run free lnf 0.000921 2
run update - 0.032418 2
run overhead - 0.13307 2
end
